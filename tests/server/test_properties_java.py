"""parse_properties reads config.properties as java.util.Properties.load does.

The expected dicts were checked against Java 17; where a JDK is present, the last test
asks Java again, so a parser change that reads any case differently fails here.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from mmsctl.errors import ConfigError
from mmsctl.server.config import load_properties, parse_properties
from tests.support.refserver import java as find_java

CASES: dict[str, tuple[str, dict[str, str]]] = {
    "separators": (
        "a=1\nb : two words \nc  spaced\nd = v\ne:=v\nf =:v\ng\t\tv\nh\n i=\n",
        {"a": "1", "b": "two words ", "c": "spaced", "d": "v", "e": "=v", "f": ":v", "g": "v",
         "h": "", "i": ""},
    ),
    "comments": (
        "# c\n! c\n  # indented\na=1 # not a comment\nb=!x\n# ends \\\nc=3\n",
        {"a": "1 # not a comment", "b": "!x", "c": "3"},
    ),
    "continuations": (
        "long=first,\\\n    second\nk=  a\\\n   \\\n  b\nx=1\\\n# not a comment\nke\\\n  y=v\nlast=z\\",
        {"long": "first,second", "k": "ab", "x": "1# not a comment", "key": "v", "last": "z"},
    ),
    "backslashes": (
        "even=a\\\\\nodd=a\\\\\\\nb\nesc=\\t\\n\\r\\f\\z\\U0041\n",
        {"even": "a\\", "odd": "a\\b", "esc": "\t\n\r\fzU0041"},
    ),
    "unicode": (
        "k=v\\u0041\\u00e9\nu\\u0041=x\nsmile=\\ud83d\\ude00\nraw=héllo wörld\n",
        {"k": "vAé", "uA": "x", "smile": "\U0001F600", "raw": "héllo wörld"},
    ),
    "escaped_keys": (
        "escaped\\=key=v\nsp\\ ace=1\ncol\\:on=2\n=empty\n",
        {"escaped=key": "v", "sp ace": "1", "col:on": "2", "": "empty"},
    ),
    "line_ends": (
        "a=1\r\nb=2\\\r\n  c\r\nd=4\re=5\r\fg=6\n\n  \n",
        {"a": "1", "b": "2c", "d": "4", "e": "5", "g": "6"},
    ),
    "mms_values": (
        "load_models=a.mar,b=squeezenet\nurl=http://x:1/a?b=c\n   key   =   value  \ndup=1\ndup=2\n",
        {"load_models": "a.mar,b=squeezenet", "url": "http://x:1/a?b=c", "key": "value  ", "dup": "2"},
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_reads_like_java(name: str) -> None:
    text, expected = CASES[name]
    assert parse_properties(text) == expected


def test_a_malformed_unicode_escape_is_a_config_error_naming_the_line(tmp_path: Path) -> None:
    path = tmp_path / "config.properties"
    path.write_text("a=1\nk=\\u00zz\n")  # java.util.Properties: "Malformed \\uxxxx encoding."
    with pytest.raises(ConfigError, match=r"config.properties: line 2: malformed \\uxxxx escape"):
        load_properties(path)


_DUMP = """
import java.io.FileReader;
import java.util.Properties;
import java.util.TreeSet;

public class PropsDump {
    public static void main(String[] args) throws Exception {
        for (String file : args) {
            Properties props = new Properties();
            try (FileReader in = new FileReader(file, java.nio.charset.StandardCharsets.UTF_8)) {
                props.load(in);
            }
            for (String key : new TreeSet<>(props.stringPropertyNames())) {
                System.out.print(key + "\\u0000" + props.getProperty(key) + "\\u0000");
            }
            System.out.print("\\u0001");
        }
    }
}
"""


def test_java_agrees_on_every_case(tmp_path: Path) -> None:
    java = find_java()
    if java is None:
        pytest.skip("no `java` on PATH and no JAVA_HOME: cannot ask java.util.Properties")
    (tmp_path / "PropsDump.java").write_text(_DUMP)
    names = sorted(CASES)
    files = []
    for name in names:
        path = tmp_path / f"{name}.properties"
        path.write_bytes(CASES[name][0].encode("utf-8"))
        files.append(str(path))
    out = subprocess.run(
        [java, "PropsDump.java", *files], cwd=tmp_path, capture_output=True, timeout=120, check=True
    ).stdout.decode("utf-8")
    chunks = out.split("\1")[:-1]
    assert len(chunks) == len(names)
    for name, chunk in zip(names, chunks):
        fields = chunk.split("\0")[:-1]
        assert dict(zip(fields[::2], fields[1::2])) == CASES[name][1], name
