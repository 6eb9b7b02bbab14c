"""`ec2 user-data` and `fleet user-data`, written once: print the boot script an instance gets."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, List, Optional

from mmsctl.cli.options import option
from mmsctl.cli.render import get_ui

if TYPE_CHECKING:
    from mmsctl.cloud.instance.userdata import LifecycleHook

__all__ = ["AcceleratorOpt", "EiaOpt", "PipSpecOpt", "ServerOpt", "user_data_command", "write_user_data"]

#: What an instance runs: ``ec2 launch`` and both ``user-data`` commands.
ServerOpt: str = option("--server", "mmsctl", help="What the instance runs (mms: MMS 1.1.11).")
EiaOpt: Optional[str] = option("--eia", help="Elastic Inference accelerator: medium|large|xlarge (eia1) or "
                               "eia2.medium|eia2.large|eia2.xlarge (retired April 2024).")
AcceleratorOpt: Optional[str] = option("--accelerator", help="eia|inf1|inf2|g4dn|g5|none (default: eia with "
                                       "--eia, else none).")
PipSpecOpt: Optional[str] = option("--pip-spec", help="What the instance pip-installs for --server mmsctl from "
                                   "the package index (default: from the asset bucket, no index).")


def user_data_command(*, fleet: bool) -> Callable[..., None]:
    """The ``user-data`` command of ``ec2`` (what ``launch`` sends) or, with *fleet*, of ``fleet`` (what the
    launch template carries: the management API on the private address, the group's launch hook completed)."""

    def user_data_cmd(
        models: List[str] = option("--models", [], help="Models to serve."),
        server: str = ServerOpt,
        eia: Optional[str] = EiaOpt,
        accelerator: Optional[str] = AcceleratorOpt,
        pip_spec: Optional[str] = PipSpecOpt,
    ) -> None:
        extra: dict[str, Any] = {}
        if fleet:
            from mmsctl.cloud.fleet.asg import LAUNCH_HOOK
            from mmsctl.cloud.instance.userdata import LifecycleHook

            extra = {"management_host": "0.0.0.0", "prefix": "fleet/<name>/",
                     "lifecycle_hook": LifecycleHook("mmsctl-fleet-<name>", LAUNCH_HOOK)}
        write_user_data(models, server, eia, accelerator, pip_spec, **extra)

    user_data_cmd.__doc__ = (
        """Print the boot script a fleet's launch template carries (management API on the private address, the
        group's launch hook completed once the server is ready)."""
        if fleet else """Print the boot script `launch` would pass to the instance (readable bash; no AWS call).""")
    return user_data_cmd


def write_user_data(models: List[str], server: str, eia: Optional[str], accelerator: Optional[str],
                    pip_spec: Optional[str], *, management_host: Optional[str] = None,
                    prefix: str = "ec2/<name>/", lifecycle_hook: "Optional[LifecycleHook]" = None) -> None:
    """Render the script (no AWS call) and write it to stdout as it is, bash for a human to read.

    *management_host* is where the management API listens: the default (loopback) for `ec2 launch`,
    ``0.0.0.0`` for a fleet's members, whose load balancer and fan-out reach it on the private address.
    Without a pip spec the mmsctl server boots from the asset bucket: the bucket, region and *prefix*
    are placeholders here (launch and create fill them in). A fleet member's script completes its group's
    *lifecycle_hook*.
    """
    from mmsctl.cloud.instance.accelerators import choose
    from mmsctl.cloud.instance.userdata import UserDataSpec, parse_models, render_user_data, server_kind

    kind = server_kind(server)
    choice = choose(accelerator, eia)
    parsed = parse_models(models)
    spec = UserDataSpec(models=parsed, server=kind, accelerator=choice.label, pip_spec=pip_spec,
                        lifecycle_hook=lifecycle_hook)
    if kind == "mmsctl" and not pip_spec:  # what launch and create send: the assets form, no package index
        from mmsctl.cloud.instance.assets import plan_assets
        from mmsctl.cloud.instance.userdata import AssetsRef

        plan = plan_assets(parsed, prefix, wheelhouse=None, dry_run=True)
        spec = replace(spec, models=plan.models, assets=AssetsRef("<asset-bucket>", prefix, "<region>"))
    if management_host is not None:
        spec = replace(spec, management_host=management_host)
    text = render_user_data(spec)
    out = get_ui().out.file
    out.write(text)
    out.flush()
