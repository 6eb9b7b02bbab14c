"""Safe extraction: hostile archives are refused with one clear line and leave nothing behind."""

from __future__ import annotations

import io
import stat
import tarfile
import zipfile
from pathlib import Path

import pytest

from mmsctl.archive import Limits, extract_archive, open_archive
from mmsctl.errors import AlreadyExistsError, ArchiveError, InputNotFoundError, UnsafeArchiveError, UsageError

MANIFEST = b'{"runtime": "python", "model": {"modelName": "evil", "handler": "h:handle"}}'


def _zip(path: Path, members: dict[str, bytes], *, modes: dict[str, int] | None = None) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            info = zipfile.ZipInfo(name)
            info.compress_type = zipfile.ZIP_DEFLATED
            if modes and name in modes:
                info.create_system = 3
                info.external_attr = modes[name] << 16
            zf.writestr(info, data)
    return path


def _tgz(path: Path, members: list[tarfile.TarInfo], data: dict[str, bytes] | None = None) -> Path:
    with tarfile.open(path, "w:gz") as tf:
        for info in members:
            payload = (data or {}).get(info.name)
            if payload is not None:
                info.size = len(payload)
                tf.addfile(info, io.BytesIO(payload))
            else:
                tf.addfile(info)
    return path


def _reg(name: str) -> tarfile.TarInfo:
    return tarfile.TarInfo(name)


def _link(name: str, kind: bytes, target: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    return info


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


@pytest.mark.parametrize(
    "member, reason",
    [
        ("../evil.py", "'..' escapes"),
        ("a/../../evil.py", "'..' escapes"),
        ("/etc/evil.py", "absolute path"),
        ("C:/evil.py", "absolute path"),
        ("..\\evil.py", "'..' escapes"),
    ],
)
def test_zip_slip_is_refused(tmp_path: Path, member: str, reason: str) -> None:
    bad = _zip(tmp_path / "bad.mar", {"MAR-INF/MANIFEST.json": MANIFEST, member: b"boom"})
    dest = tmp_path / "out"
    with pytest.raises(UnsafeArchiveError, match=reason):
        extract_archive(bad, dest)
    assert not dest.exists()
    assert _leftovers(tmp_path) == ["bad.mar"]
    with pytest.raises(UnsafeArchiveError):
        open_archive(bad)


def test_zip_symlink_is_refused(tmp_path: Path) -> None:
    bad = _zip(
        tmp_path / "bad.mar",
        {"MAR-INF/MANIFEST.json": MANIFEST, "link": b"/etc/passwd"},
        modes={"link": stat.S_IFLNK | 0o777},
    )
    with pytest.raises(UnsafeArchiveError, match="symlink"):
        extract_archive(bad, tmp_path / "out")
    assert _leftovers(tmp_path) == ["bad.mar"]


@pytest.mark.parametrize(
    "member, reason",
    [
        (_link("evil", tarfile.SYMTYPE, "/etc/passwd"), "symlink"),
        (_link("evil", tarfile.LNKTYPE, "m/MAR-INF/MANIFEST.json"), "hardlink"),
        (_link("dev", tarfile.CHRTYPE), "device"),
        (_link("fifo", tarfile.FIFOTYPE), "device, fifo"),
        (_reg("../../evil.py"), "'..' escapes"),
        (_reg("/tmp/evil.py"), "absolute path"),
    ],
)
def test_tgz_links_devices_and_escapes_are_refused(tmp_path: Path, member: tarfile.TarInfo, reason: str) -> None:
    ok = _reg("m/MAR-INF/MANIFEST.json")
    bad = _tgz(tmp_path / "bad.tar.gz", [ok, member], {ok.name: MANIFEST, member.name: b"x"})
    with pytest.raises(UnsafeArchiveError, match=reason) as info:
        extract_archive(bad, tmp_path / "out")
    assert "\n" not in str(info.value)
    assert _leftovers(tmp_path) == ["bad.tar.gz"]


def test_duplicate_members_are_refused(tmp_path: Path) -> None:
    bad = tmp_path / "dup.mar"
    with zipfile.ZipFile(bad, "w") as zf, pytest.warns(UserWarning):
        zf.writestr("MAR-INF/MANIFEST.json", MANIFEST)
        zf.writestr("a.py", b"1")
        zf.writestr("a.py", b"2")
    with pytest.raises(UnsafeArchiveError, match="duplicate"):
        extract_archive(bad, tmp_path / "out")


def test_zip_bomb_ratio_is_refused(tmp_path: Path) -> None:
    bomb = _zip(tmp_path / "bomb.mar", {"MAR-INF/MANIFEST.json": MANIFEST, "zeros.params": bytes(4 * 1024 * 1024)})
    limits = Limits(ratio_floor=1024 * 1024, max_ratio=100)
    with pytest.raises(UnsafeArchiveError, match="compression ratio"):
        open_archive(bomb, limits=limits)
    with pytest.raises(UnsafeArchiveError, match="compression ratio"):
        extract_archive(bomb, tmp_path / "out", limits=limits)
    # the same file is fine under the default limits (small members are not ratio-checked)
    assert open_archive(bomb).model_name == "evil"


def test_tgz_bomb_ratio_is_refused(tmp_path: Path) -> None:
    ok = _reg("MAR-INF/MANIFEST.json")
    zeros = _reg("zeros.params")
    bomb = _tgz(tmp_path / "bomb.tar.gz", [ok, zeros], {ok.name: MANIFEST, zeros.name: bytes(4 * 1024 * 1024)})
    with pytest.raises(UnsafeArchiveError, match="compression ratio"):
        extract_archive(bomb, tmp_path / "out", limits=Limits(ratio_floor=1024 * 1024, max_ratio=100))


def test_total_size_and_member_count_caps(tmp_path: Path) -> None:
    archive = _zip(tmp_path / "big.mar", {"MAR-INF/MANIFEST.json": MANIFEST, **{f"f{i}": b"x" * 100 for i in range(20)}})
    with pytest.raises(UnsafeArchiveError, match=r"extracts to more than 1000 bytes \(max_archive_size"):
        extract_archive(archive, tmp_path / "out", limits=Limits(max_total_bytes=1000))
    with pytest.raises(UnsafeArchiveError, match=r"more than 10 members \(max_archive_members"):
        extract_archive(archive, tmp_path / "out", limits=Limits(max_members=10))
    assert not (tmp_path / "out").exists()


def test_not_an_archive(tmp_path: Path) -> None:
    junk = tmp_path / "junk.mar"
    junk.write_bytes(b"this is not a zip")
    with pytest.raises(ArchiveError, match="not a model archive"):
        open_archive(junk)


def test_truncated_zip(tmp_path: Path) -> None:
    good = _zip(tmp_path / "good.mar", {"MAR-INF/MANIFEST.json": MANIFEST, "w.params": bytes(range(256)) * 400})
    cut = tmp_path / "cut.mar"
    cut.write_bytes(good.read_bytes()[:-200])
    with pytest.raises(ArchiveError, match="corrupt or truncated"):
        open_archive(cut)


def test_truncated_tgz(tmp_path: Path) -> None:
    import os

    payload = os.urandom(200_000)
    good = _tgz(tmp_path / "good.tar.gz", [_reg("MAR-INF/MANIFEST.json"), _reg("w.params")],
                {"MAR-INF/MANIFEST.json": MANIFEST, "w.params": payload})
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(good.read_bytes()[:5000])
    dest = tmp_path / "out"
    with pytest.raises(ArchiveError, match="corrupt or truncated"):
        extract_archive(cut, dest)
    assert not dest.exists()
    assert _leftovers(tmp_path) == ["cut.tar.gz", "good.tar.gz"]


def test_missing_archive(tmp_path: Path) -> None:
    with pytest.raises(InputNotFoundError):
        extract_archive(tmp_path / "nope.mar")
    with pytest.raises(InputNotFoundError):
        open_archive(tmp_path / "nope.mar")


def test_extract_refuses_a_folder_source(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="folder already"):
        extract_archive(tmp_path)


def test_extract_puts_the_manifest_at_the_top_and_needs_force_to_replace(tmp_path: Path) -> None:
    ok = _reg("model/MAR-INF/MANIFEST.json")
    script = _reg("model/run.sh")
    script.mode = 0o755
    archive = _tgz(tmp_path / "model.tar.gz", [ok, script], {ok.name: MANIFEST, script.name: b"#!/bin/sh\n"})
    dest = tmp_path / "out"
    result = extract_archive(archive, dest)
    assert result.root == dest
    assert (dest / "MAR-INF" / "MANIFEST.json").read_bytes() == MANIFEST
    assert (dest / "run.sh").stat().st_mode & 0o111
    (dest / "stale.txt").write_text("old")
    with pytest.raises(AlreadyExistsError, match="already exists") as info:
        extract_archive(archive, dest)
    assert isinstance(info.value, ArchiveError) and "force=True" in (info.value.hint or "")  # the CLI says --force
    extract_archive(archive, dest, force=True)
    assert not (dest / "stale.txt").exists()
    assert _leftovers(tmp_path) == ["model.tar.gz", "out"]


def test_extract_default_destination_is_named_after_the_archive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    archive = _zip(tmp_path / "squeeze.mar", {"MAR-INF/MANIFEST.json": MANIFEST})
    monkeypatch.chdir(tmp_path)
    assert extract_archive(archive).root == tmp_path / "squeeze"


# -- ISA-L inflate (archive/inflate.py) --------------------------------------------------------------

def _damaged(good: Path, out: Path, member: str, how: str) -> Path:
    """*good* with *member*'s compressed bytes flipped in the middle, or its CRC in the central directory off."""
    data = bytearray(good.read_bytes())
    with zipfile.ZipFile(good) as zf:
        info = zf.getinfo(member)
    if how == "bytes":
        name_len, extra_len = int.from_bytes(data[info.header_offset + 26:info.header_offset + 28], "little"), \
            int.from_bytes(data[info.header_offset + 28:info.header_offset + 30], "little")
        start = info.header_offset + 30 + name_len + extra_len
        for i in range(start + info.compress_size // 2, start + info.compress_size // 2 + 64):
            data[i] ^= 0x5A
    else:  # the CRC of the central directory entry (what zipfile and the fast path check against)
        central = data.find(b"PK\x01\x02")
        while data[central + 46:central + 46 + len(member)] != member.encode():
            central = data.find(b"PK\x01\x02", central + 4)
        data[central + 16] ^= 0xFF
    out.write_bytes(bytes(data))
    return out


def test_the_fast_inflate_extracts_what_zipfile_extracts(tmp_path: Path) -> None:
    import os

    from mmsctl.archive import inflate

    payload = os.urandom(300_000) + bytes(3_000_000) + os.urandom(5_000)  # several reads, both ways
    good = _zip(tmp_path / "good.mar", {"MAR-INF/MANIFEST.json": MANIFEST, "w.params": payload, "empty.txt": b""})
    with zipfile.ZipFile(good) as zf:
        for info in zf.infolist():
            reader = inflate.open_member(zf, info)
            assert isinstance(reader, inflate._Inflated) == (inflate._fast_zlib is not None)
            chunks = []
            while chunk := reader.read(1 << 16):
                chunks.append(chunk)
            assert b"".join(chunks) == zf.read(info)
    assert (open_archive(good).root / "w.params").read_bytes() == payload


@pytest.mark.parametrize("how", ["bytes", "crc"])
def test_a_damaged_deflated_member_is_one_line_and_leaves_nothing(tmp_path: Path, how: str) -> None:
    import os

    good = _zip(tmp_path / "good.mar", {"MAR-INF/MANIFEST.json": MANIFEST, "w.params": os.urandom(200_000) * 3})
    bad = _damaged(good, tmp_path / "bad.mar", "w.params", how)
    dest = tmp_path / "out"
    with pytest.raises(ArchiveError, match="corrupt or truncated") as err:
        extract_archive(bad, dest)
    assert "\n" not in str(err.value)
    assert not dest.exists()
    assert _leftovers(tmp_path) == ["bad.mar", "good.mar"]
