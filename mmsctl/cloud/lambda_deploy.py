"""``mmsctl lambda deploy``: create or update, idempotently, everything one function needs.

In order: the ECR repository (with a pull policy for this function), the model
bucket holding the archive (versioned; the function pins the version it was given),
the input and output buckets, a least-privilege role, the log group, the function
(image package), its URL, the S3 trigger (permission with source ARN and account,
then the bucket notification with image-suffix filters), and the keep-warm
schedule or provisioned concurrency. Each step first reads what exists and changes
only what differs, so a second deploy with the same flags makes no change. Every
resource carries ``mmsctl:lambda=NAME``; the spec was checked (:mod:`lambda_spec`)
before the first call.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from mmsctl.cloud import lambda_policy as policy
from mmsctl.cloud import lambda_spec as names
from mmsctl.cloud._session import AwsSession
from mmsctl.cloud.lambda_resources import (
    as_dict,
    aws_code,
    bucket_tags,
    function_or_none,
    lambda_tags,
    ours,
    partition,
    wait_function_ready,
)
from mmsctl.cloud.lambda_spec import DeploySpec
from mmsctl.errors import CloudError, UsageError
from mmsctl.cloud import lambda_env as env
from mmsctl.cloud.lambda_events import WARM_EVENT

__all__ = ["Change", "DeployResult", "ForeignBucket", "MissingImage", "deploy", "ensure_repository",
           "resolve_model_file"]


class MissingImage(CloudError):
    """The function's image is not in ECR: it has to be built and pushed first."""

    reference = "lambda-missing-image"

    def __init__(self, message: str, *, function: str, hint: Optional[str] = None) -> None:
        super().__init__(message, hint=hint)
        #: The function whose image is missing.
        self.function = function


class ForeignBucket(CloudError):
    """A bucket deploy would create exists, and mmsctl did not make it for this function."""

    reference = "lambda-foreign-bucket"

_WARM_TARGET = "mmsctl-warm"
_SID_S3 = "mmsctl-s3"
_SID_WARM = "mmsctl-warm"
_SID_URL = "mmsctl-url-public"
_SID_URL_INVOKE = "mmsctl-url-public-invoke"
TAG_MODEL = "mmsctl:model"
TAG_INPUT = "mmsctl:input-bucket"
TAG_OUTPUT = "mmsctl:output-bucket"
TAG_MODEL_BUCKET = "mmsctl:model-bucket"


@dataclass
class Change:
    """One line of deploy's report."""

    action: str  # create | update | reuse | delete
    kind: str
    id: str

    def to_dict(self) -> dict[str, str]:
        return {"action": self.action, "kind": self.kind, "id": self.id}


@dataclass
class DeployResult:
    """What deploy made or would make (dry run), and where to reach the function."""

    name: str
    region: str
    function_arn: str
    image: str
    role_arn: str
    model: Optional[str]
    model_version: Optional[str]
    url: Optional[str] = None
    url_auth: Optional[str] = None
    schedule: Optional[str] = None
    provisioned: Optional[int] = None
    input: Optional[str] = None
    output: Optional[str] = None
    changes: list[Change] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "region": self.region, "function_arn": self.function_arn, "image": self.image,
            "role_arn": self.role_arn, "model": self.model, "model_version": self.model_version,
            "url": self.url, "url_auth": self.url_auth, "schedule": self.schedule, "provisioned": self.provisioned,
            "input": self.input, "output": self.output, "changes": [c.to_dict() for c in self.changes],
            "warnings": self.warnings,
        }


def ensure_repository(aws: AwsSession, name: str) -> tuple[str, str]:
    """Create the ECR repository ``mmsctl-lambda/NAME`` (tagged, scan on push) with a pull policy for
    function NAME only, or bring an existing one's policy up to date.

    Returns:
        (``create`` | ``update`` | ``reuse``, the repository URI).
    """
    repo = names.repository_name(name)
    account = aws.account_id()
    scope = policy.RoleScope(partition(aws.region), aws.region, account, name)
    wanted = policy.repository_policy(scope)
    try:
        found = aws.call("ecr", "describe_repositories", repositoryNames=[repo])["repositories"][0]
    except CloudError as exc:
        if aws_code(exc) != "RepositoryNotFoundException":
            raise
        made = aws.call("ecr", "create_repository", repositoryName=repo,
                        imageScanningConfiguration={"scanOnPush": True},
                        tags=[{"Key": k, "Value": v} for k, v in lambda_tags(name, "ecr-repository").items()])
        aws.call("ecr", "set_repository_policy", repositoryName=repo, policyText=policy.dumps(wanted))
        uri = (made.get("repository") or {}).get("repositoryUri")
        return "create", uri or f"{account}.dkr.ecr.{aws.region}.amazonaws.com/{repo}"
    current = None
    try:
        current = json.loads(aws.call("ecr", "get_repository_policy", repositoryName=repo)["policyText"])
    except CloudError as exc:
        if aws_code(exc) != "RepositoryPolicyNotFoundException":
            raise
    if current != wanted:
        aws.call("ecr", "set_repository_policy", repositoryName=repo, policyText=policy.dumps(wanted))
        return "update", str(found["repositoryUri"])
    return "reuse", str(found["repositoryUri"])


def resolve_model_file(model: str) -> Path:
    """The archive file deploy uploads for MODEL (zoo name, path, URL), found before any AWS call.

    Raises:
        UsageError: MODEL is a folder (deploy uploads one archive file).
        ModelNotFoundError, OfflineError, DownloadError: from the zoo.
    """
    from mmsctl.zoo import resolve_model

    path = Path(resolve_model(model, progress=False).path)
    if path.is_dir():
        raise UsageError(f"{model} is a folder; deploy uploads one archive file",
                         hint=f"make one with `mmsctl archive create {model}`, or bake it: `mmsctl lambda build`")
    return path


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1024 * 1024), b""):
            digest.update(block)
    return digest.hexdigest()


class _Deployer:
    def __init__(self, aws: AwsSession, spec: DeploySpec, sleep: Callable[[float], None]) -> None:
        self.aws = aws
        self.spec = spec
        self.sleep = sleep
        self.name = spec.name
        self.changes: list[Change] = []
        self.account = aws.account_id()
        self.partition = partition(aws.region)
        self.function_arn = f"arn:{self.partition}:lambda:{aws.region}:{self.account}:function:{self.name}"
        self.qualifier = names.ALIAS if spec.provisioned else None
        self.target_arn = f"{self.function_arn}:{self.qualifier}" if self.qualifier else self.function_arn

    def qualified(self) -> dict[str, Any]:
        """``Qualifier=live`` where calls address the alias (provisioned concurrency), else nothing."""
        return {"Qualifier": self.qualifier} if self.qualifier else {}

    def note(self, action: str, kind: str, id: str) -> None:
        self.changes.append(Change(action, kind, id))

    def tags(self, component: str, extra: Optional[dict[str, str]] = None) -> dict[str, str]:
        return lambda_tags(self.name, component, extra)

    # -- ECR ----------------------------------------------------------------------------------

    def image(self) -> str:
        """The image URI the function runs; one in our repository is pinned to its digest, so a new
        push under the same tag is noticed (Lambda resolves a tag only when the code is set)."""
        repo = names.repository_name(self.name)
        uri = self.spec.image or f"{self.account}.dkr.ecr.{self.aws.region}.amazonaws.com/{repo}:latest"
        parsed = names.ecr_uri(uri)
        if parsed is None or parsed[2] != repo:
            return uri  # an image from another repository: used as it is, nothing of ours to manage
        action, _ = ensure_repository(self.aws, self.name)
        self.note(action, "ecr-repository", repo)
        tag = parsed[3]
        if tag is None:
            return uri
        try:
            found = self.aws.call("ecr", "describe_images", repositoryName=repo, imageIds=[{"imageTag": tag}])
        except CloudError as exc:
            if aws_code(exc) not in ("ImageNotFoundException", "RepositoryNotFoundException"):
                raise
            hint = f"build the image of {self.name} and push it to {repo} first"
            if not self.aws.dry_run:
                raise MissingImage(f"no image {uri} in ECR", function=self.name, hint=hint) from exc
            self.spec.warnings.append(f"no image {uri} in ECR yet ({hint})")
            return uri
        digest = found["imageDetails"][0]["imageDigest"]
        return f"{uri.rsplit(':', 1)[0]}@{digest}"

    # -- buckets ------------------------------------------------------------------------------

    def bucket(self, bucket: str, component: str, *, versioned: bool = False, must_be_ours: bool = False) -> bool:
        """Create *bucket* (tagged, private) if missing; True if it is ours."""
        found = bucket_tags(self.aws, bucket)
        if found is None:
            params: dict[str, Any] = {"Bucket": bucket}
            if self.aws.region != "us-east-1":
                params["CreateBucketConfiguration"] = {"LocationConstraint": self.aws.region}
            self.aws.call("s3", "create_bucket", **params)
            self.aws.call("s3", "put_public_access_block", Bucket=bucket, PublicAccessBlockConfiguration={
                "BlockPublicAcls": True, "IgnorePublicAcls": True, "BlockPublicPolicy": True,
                "RestrictPublicBuckets": True})
            if versioned:
                self.aws.call("s3", "put_bucket_versioning", Bucket=bucket,
                              VersioningConfiguration={"Status": "Enabled"})
            self.aws.call("s3", "put_bucket_tagging", Bucket=bucket, Tagging={
                "TagSet": [{"Key": k, "Value": v} for k, v in self.tags(component).items()]})
            self.note("create", component, bucket)
            return True
        if ours(found, self.name):
            self.note("reuse", component, bucket)
            return True
        if must_be_ours:
            raise ForeignBucket(f"bucket {bucket} exists and was not made by mmsctl for {self.name}",
                                hint="name it as the model bucket to use it on purpose")
        self.note("reuse", component, f"{bucket} (yours: kept on destroy)")
        return False

    def model(self, model_file: Optional[Path]) -> tuple[Optional[str], Optional[str], Optional[str]]:
        """(s3 URI, version id, our bucket) of the model the function loads; (None, None, None) for a baked one."""
        spec = self.spec
        if spec.model_source == "image":
            return None, None, None
        if spec.model.startswith("s3://"):
            where = env.parse_s3_uri(spec.model)
            return f"s3://{where.bucket}/{where.key}", where.version_id, None
        assert model_file is not None
        default = names.model_bucket_name(self.name, self.account, self.aws.region)
        bucket = spec.model_bucket or default
        mine = self.bucket(bucket, "model-bucket", versioned=True, must_be_ours=spec.model_bucket is None)
        key = f"models/{model_file.name}"
        digest = _sha256(model_file)
        try:
            head = self.aws.call("s3", "head_object", Bucket=bucket, Key=key)
        except CloudError as exc:
            if aws_code(exc) not in ("404", "NoSuchKey", "NotFound", "NoSuchBucket"):
                raise
            head = None
        if head is not None and (head.get("Metadata") or {}).get("mmsctl-sha256") == digest:
            version = head.get("VersionId")
            self.note("reuse", "model-object", f"s3://{bucket}/{key}")
        else:
            with open(model_file, "rb") as fh:
                put = self.aws.call("s3", "put_object", Bucket=bucket, Key=key, Body=fh,
                                    ContentType="application/octet-stream", Metadata={"mmsctl-sha256": digest})
            version = put.get("VersionId") or (None if not self.aws.dry_run else "<new version>")
            self.note("create", "model-object", f"s3://{bucket}/{key}")
        if version in ("null", ""):
            version = None
        return f"s3://{bucket}/{key}", version, bucket if mine else None

    # -- IAM ----------------------------------------------------------------------------------

    def role(self, scope: policy.RoleScope) -> str:
        role = names.role_name(self.name)
        doc = policy.dumps(policy.permissions_policy(scope))
        try:
            found = self.aws.call("iam", "get_role", RoleName=role)["Role"]
        except CloudError as exc:
            if aws_code(exc) != "NoSuchEntity":
                raise
            found = None
        if found is None:
            made = self.aws.call("iam", "create_role", RoleName=role, Path=names.ROLE_PATH,
                                 AssumeRolePolicyDocument=policy.dumps(policy.trust_policy()),
                                 Description=f"mmsctl lambda {self.name}: execution role",
                                 Tags=[{"Key": k, "Value": v} for k, v in self.tags("lambda-role").items()])
            self.aws.call("iam", "put_role_policy", RoleName=role, PolicyName=names.POLICY_NAME, PolicyDocument=doc)
            self.note("create", "iam-role", role)
            return str(made["Role"]["Arn"]).replace("<account>", self.account)
        if not ours(as_dict(found.get("Tags")), self.name):
            raise CloudError(f"IAM role {role} exists and was not made by mmsctl for {self.name}; refusing to change it")
        current = None
        try:
            current = self.aws.call("iam", "get_role_policy", RoleName=role, PolicyName=names.POLICY_NAME)
        except CloudError as exc:
            if aws_code(exc) != "NoSuchEntity":
                raise
        current_doc = (current or {}).get("PolicyDocument")
        if isinstance(current_doc, str):
            current_doc = json.loads(current_doc)
        if current_doc != json.loads(doc):
            self.aws.call("iam", "put_role_policy", RoleName=role, PolicyName=names.POLICY_NAME, PolicyDocument=doc)
            self.note("update", "iam-role", f"{role} (policy)")
        else:
            self.note("reuse", "iam-role", role)
        return str(found["Arn"])

    def log_group(self) -> None:
        group = names.log_group_name(self.name)
        found = self.aws.call("logs", "describe_log_groups", logGroupNamePrefix=group).get("logGroups", [])
        if any(g.get("logGroupName") == group for g in found):
            self.note("reuse", "log-group", group)
            return
        self.aws.call("logs", "create_log_group", logGroupName=group, tags=self.tags("log-group"))
        self.aws.call("logs", "put_retention_policy", logGroupName=group, retentionInDays=names.LOG_RETENTION_DAYS)
        self.note("create", "log-group", group)

    # -- the function -------------------------------------------------------------------------

    def function(self, image: str, role_arn: str, variables: dict[str, str], extra_tags: dict[str, str],
                 previous: Optional[dict[str, Any]]) -> None:
        spec = self.spec
        config: dict[str, Any] = {"Role": role_arn, "Timeout": spec.timeout, "MemorySize": spec.memory,
                  "Environment": {"Variables": variables},
                  "Description": f"mmsctl lambda: {spec.model}"[:256]}
        wanted_tags = self.tags("lambda-function", extra_tags)
        if previous is None:
            self._create_function(image, config, wanted_tags)
            self.note("create", "lambda-function", self.name)
            self._settle()
            return
        current = previous["Configuration"]
        changed = False
        if (previous.get("Code") or {}).get("ImageUri") != image:
            self.aws.call("lambda", "update_function_code", FunctionName=self.name, ImageUri=image)
            self._settle()
            changed = True
        now = {"Role": current.get("Role"), "Timeout": current.get("Timeout"), "MemorySize": current.get("MemorySize"),
               "Environment": {"Variables": (current.get("Environment") or {}).get("Variables") or {}},
               "Description": current.get("Description", "")}
        if now != config:
            self.aws.call("lambda", "update_function_configuration", FunctionName=self.name, **config)
            self._settle()
            changed = True
        if {k: v for k, v in (previous.get("Tags") or {}).items()} != wanted_tags:
            stale = [k for k in (previous.get("Tags") or {}) if k not in wanted_tags and k.startswith("mmsctl:")]
            if stale:
                self.aws.call("lambda", "untag_resource", Resource=self.function_arn, TagKeys=stale)
            self.aws.call("lambda", "tag_resource", Resource=self.function_arn, Tags=wanted_tags)
            changed = True
        self.note("update" if changed else "reuse", "lambda-function", self.name)

    def _settle(self) -> None:
        if not self.aws.dry_run:
            wait_function_ready(self.aws, self.name, sleep=self.sleep)

    def _create_function(self, image: str, config: dict[str, Any], wanted_tags: dict[str, str]) -> None:
        # A new role takes a few seconds to reach Lambda (IAM is eventually consistent).
        delay = 2.0
        for attempt in range(10):
            try:
                self.aws.call("lambda", "create_function", FunctionName=self.name, PackageType="Image",
                              Code={"ImageUri": image}, Architectures=["x86_64"], Tags=wanted_tags, **config)
                return
            except CloudError as exc:
                if "cannot be assumed" in exc.message and attempt < 9:
                    self.sleep(delay)
                    delay = min(delay * 1.5, 10.0)
                    continue
                raise

    def provisioned(self, existing_alias: Optional[dict[str, Any]]) -> None:
        count = self.spec.provisioned
        if count is None:
            if existing_alias is not None:
                self._drop_provisioned()
            return
        version = self.aws.call("lambda", "publish_version", FunctionName=self.name).get("Version", "<new version>")
        if existing_alias is None:
            self.aws.call("lambda", "create_alias", FunctionName=self.name, Name=names.ALIAS, FunctionVersion=version)
        else:
            self.aws.call("lambda", "update_alias", FunctionName=self.name, Name=names.ALIAS, FunctionVersion=version)
        self.aws.call("lambda", "put_provisioned_concurrency_config", FunctionName=self.name,
                      Qualifier=names.ALIAS, ProvisionedConcurrentExecutions=count)
        self.note("update", "provisioned-concurrency", f"{self.name}:{names.ALIAS} = {count}")

    def _drop_provisioned(self) -> None:
        try:
            self.aws.call("lambda", "delete_provisioned_concurrency_config", FunctionName=self.name,
                          Qualifier=names.ALIAS)
        except CloudError as exc:
            if aws_code(exc) not in ("ResourceNotFoundException", "ProvisionedConcurrencyConfigNotFoundException"):
                raise
        self.aws.call("lambda", "delete_alias", FunctionName=self.name, Name=names.ALIAS)
        self.note("delete", "lambda-alias", f"{self.name}:{names.ALIAS}")

    def alias(self) -> Optional[dict[str, Any]]:
        try:
            return self.aws.call("lambda", "get_alias", FunctionName=self.name, Name=names.ALIAS)
        except CloudError as exc:
            if aws_code(exc) == "ResourceNotFoundException":
                return None
            raise

    # -- permissions, URL, trigger, schedule --------------------------------------------------

    def statements(self) -> dict[str, dict[str, Any]]:
        try:
            raw = self.aws.call("lambda", "get_policy", FunctionName=self.name, **self.qualified())["Policy"]
        except CloudError as exc:
            if aws_code(exc) == "ResourceNotFoundException":
                return {}
            raise
        return {s.get("Sid", ""): s for s in json.loads(raw).get("Statement", [])}

    def permission(self, existing: dict[str, dict[str, Any]], sid: str, **params: Any) -> None:
        wanted = _signature(params)
        found = existing.get(sid)
        if found is not None and _statement_signature(found) == wanted:
            return
        qualifier = self.qualified()
        if found is not None:
            self.aws.call("lambda", "remove_permission", FunctionName=self.name, StatementId=sid, **qualifier)
        self.aws.call("lambda", "add_permission", FunctionName=self.name, StatementId=sid, **qualifier, **params)
        self.note("update" if found else "create", "lambda-permission", sid)

    def drop_permissions(self, existing: dict[str, dict[str, Any]], keep: set[str]) -> None:
        qualifier = self.qualified()
        for sid in existing:
            if sid.startswith("mmsctl-") and sid not in keep:
                self.aws.call("lambda", "remove_permission", FunctionName=self.name, StatementId=sid, **qualifier)
                self.note("delete", "lambda-permission", sid)

    def url(self, existing: dict[str, dict[str, Any]], keep: set[str]) -> tuple[Optional[str], Optional[str]]:
        qualifier = self.qualified()
        try:
            found: Optional[dict[str, Any]] = self.aws.call("lambda", "get_function_url_config",
                                                            FunctionName=self.name, **qualifier)
        except CloudError as exc:
            if aws_code(exc) != "ResourceNotFoundException":
                raise
            found = None
        if not self.spec.url:
            if found is not None:
                self.aws.call("lambda", "delete_function_url_config", FunctionName=self.name, **qualifier)
                self.note("delete", "function-url", found.get("FunctionUrl", self.name))
            return None, None
        auth = "NONE" if self.spec.public else "AWS_IAM"
        if found is None:
            made = self.aws.call("lambda", "create_function_url_config", FunctionName=self.name, AuthType=auth,
                                 **qualifier)
            self.note("create", "function-url", made.get("FunctionUrl", f"<new URL of {self.name}>"))
            found = made
        elif found.get("AuthType") != auth:
            self.aws.call("lambda", "update_function_url_config", FunctionName=self.name, AuthType=auth, **qualifier)
            self.note("update", "function-url", f"{found.get('FunctionUrl')} (AuthType {auth})")
        else:
            self.note("reuse", "function-url", str(found.get("FunctionUrl")))
        if self.spec.public:
            self.permission(existing, _SID_URL, Action="lambda:InvokeFunctionUrl", Principal="*",
                            FunctionUrlAuthType="NONE")
            self.permission(existing, _SID_URL_INVOKE, Action="lambda:InvokeFunction", Principal="*",
                            InvokedViaFunctionUrl=True)
            keep.update({_SID_URL, _SID_URL_INVOKE})
        return found.get("FunctionUrl") or f"<new URL of {self.name}>", auth

    def trigger(self, existing: dict[str, dict[str, Any]], keep: set[str], previous_input: Optional[str]) -> None:
        spec = self.spec
        if previous_input and previous_input != spec.input_bucket:
            self._set_notifications(previous_input, [])
        if not spec.input_bucket:
            return
        self.permission(existing, _SID_S3, Action="lambda:InvokeFunction", Principal="s3.amazonaws.com",
                        SourceArn=f"arn:{self.partition}:s3:::{spec.input_bucket}", SourceAccount=self.account)
        keep.add(_SID_S3)
        ours_now = []
        for suffix in spec.suffixes:
            rules = [{"Name": "suffix", "Value": suffix}]
            if spec.input_prefix:
                rules.insert(0, {"Name": "prefix", "Value": spec.input_prefix})
            ours_now.append({"Id": names.notification_id(self.name, suffix), "LambdaFunctionArn": self.target_arn,
                             "Events": ["s3:ObjectCreated:*"], "Filter": {"Key": {"FilterRules": rules}}})
        self._set_notifications(spec.input_bucket, ours_now)

    def _set_notifications(self, bucket: str, wanted: list[dict[str, Any]]) -> None:
        try:
            current = self.aws.call("s3", "get_bucket_notification_configuration", Bucket=bucket)
        except CloudError as exc:
            if aws_code(exc) in ("NoSuchBucket", "404") and not wanted:
                return
            if not self.aws.dry_run or aws_code(exc) not in ("NoSuchBucket", "404"):
                raise
            current = {}
        config = {k: v for k, v in current.items()
                  if k in ("TopicConfigurations", "QueueConfigurations", "LambdaFunctionConfigurations",
                           "EventBridgeConfiguration")}
        prefix = names.notification_prefix(self.name)
        lambdas = config.get("LambdaFunctionConfigurations", [])
        mine = [c for c in lambdas if str(c.get("Id", "")).startswith(prefix)]
        if _normalised(mine) == _normalised(wanted):
            if wanted:
                self.note("reuse", "s3-notification", f"s3://{bucket} ({len(wanted)} suffix filters)")
            return
        config["LambdaFunctionConfigurations"] = [c for c in lambdas if c not in mine] + wanted
        if not config["LambdaFunctionConfigurations"]:
            del config["LambdaFunctionConfigurations"]
        self.aws.call("s3", "put_bucket_notification_configuration", Bucket=bucket, NotificationConfiguration=config)
        action = "delete" if not wanted else ("update" if mine else "create")
        self.note(action, "s3-notification", f"s3://{bucket} ({len(wanted or mine)} suffix filters)")

    def schedule(self, existing: dict[str, dict[str, Any]], keep: set[str]) -> Optional[str]:
        rule = names.rule_name(self.name)
        try:
            found: Optional[dict[str, Any]] = self.aws.call("events", "describe_rule", Name=rule)
        except CloudError as exc:
            if aws_code(exc) != "ResourceNotFoundException":
                raise
            found = None
        expression = self.spec.schedule
        if expression is None:
            if found is not None:
                targets = self.aws.call("events", "list_targets_by_rule", Rule=rule).get("Targets", [])
                if targets:
                    self.aws.call("events", "remove_targets", Rule=rule, Ids=[t["Id"] for t in targets])
                self.aws.call("events", "delete_rule", Name=rule)
                self.note("delete", "schedule", rule)
            return None
        rule_arn = f"arn:{self.partition}:events:{self.aws.region}:{self.account}:rule/{rule}"
        if found is None or found.get("ScheduleExpression") != expression or found.get("State") != "ENABLED":
            self.aws.call("events", "put_rule", Name=rule, ScheduleExpression=expression, State="ENABLED",
                          Description=f"mmsctl lambda {self.name}: keep one instance warm",
                          Tags=[{"Key": k, "Value": v} for k, v in self.tags("schedule").items()])
            self.note("update" if found else "create", "schedule", f"{rule} {expression}")
        else:
            self.note("reuse", "schedule", f"{rule} {expression}")
        self.permission(existing, _SID_WARM, Action="lambda:InvokeFunction", Principal="events.amazonaws.com",
                        SourceArn=rule_arn)
        keep.add(_SID_WARM)
        targets = [] if found is None else self.aws.call("events", "list_targets_by_rule", Rule=rule).get("Targets", [])
        wanted = {"Id": _WARM_TARGET, "Arn": self.target_arn, "Input": json.dumps(WARM_EVENT)}
        if not any({k: t.get(k) for k in wanted} == wanted for t in targets):
            self.aws.call("events", "put_targets", Rule=rule, Targets=[wanted])
            self.note("create", "schedule-target", f"{rule} -> {self.name}")
        return expression


def _signature(params: dict[str, Any]) -> tuple[Any, ...]:
    return (params.get("Action"), params.get("Principal"), params.get("SourceArn"), params.get("SourceAccount"),
            params.get("FunctionUrlAuthType"), bool(params.get("InvokedViaFunctionUrl")))


def _statement_signature(statement: dict[str, Any]) -> tuple[Any, ...]:
    principal = statement.get("Principal")
    if isinstance(principal, dict):
        principal = principal.get("Service") or principal.get("AWS")
    cond = statement.get("Condition") or {}
    arn_like = cond.get("ArnLike") or {}
    equals = cond.get("StringEquals") or {}
    flags = cond.get("Bool") or {}
    invoked = str(flags.get("lambda:InvokedViaFunctionUrl", "")).lower() == "true"
    return (statement.get("Action"), principal, arn_like.get("AWS:SourceArn"), equals.get("AWS:SourceAccount"),
            equals.get("lambda:FunctionUrlAuthType"), invoked)


def _normalised(configs: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps({"Id": c.get("Id"), "Arn": c.get("LambdaFunctionArn"), "Events": sorted(c.get("Events", [])),
                              "Rules": sorted((r["Name"].lower(), r["Value"])
                                              for r in ((c.get("Filter") or {}).get("Key") or {}).get("FilterRules", []))},
                             sort_keys=True) for c in configs)


def deploy(aws: AwsSession, spec: DeploySpec, *, model_file: Optional[Path] = None,
           sleep: Callable[[float], None] = time.sleep) -> DeployResult:
    """Create or update everything function *spec.name* needs (see the module docstring).

    Args:
        aws: the session (``dry_run`` for a plan: reads are made, changes are only listed).
        spec: a checked :class:`DeploySpec`.
        model_file: the archive to upload (from :func:`resolve_model_file`), unless the model is
            an ``s3://`` URI or baked into the image.
        sleep: how to wait between polls (tests pass a no-op).

    Raises:
        CloudError: AWS refused a call, or a resource of that name exists and is not ours.
    """
    d = _Deployer(aws, spec, sleep)
    previous = function_or_none(aws, spec.name)
    if previous is not None and not ours(previous.get("Tags"), spec.name):
        raise CloudError(f"function {spec.name} exists and was not deployed by mmsctl (no mmsctl:lambda={spec.name} "
                         "tag); refusing to change it", hint="choose another NAME")
    image = d.image()
    model_uri, model_version, model_bucket = d.model(model_file)
    if spec.input_bucket and spec.output_bucket:
        d.bucket(spec.input_bucket, "input-bucket")
        if spec.output_bucket != spec.input_bucket:
            d.bucket(spec.output_bucket, "output-bucket")
    where = env.parse_s3_uri(model_uri) if model_uri else None
    scope = policy.RoleScope(
        d.partition, aws.region, d.account, spec.name,
        model_bucket=where.bucket if where else None, model_key=where.key if where else None,
        model_versioned=bool(model_version), input_bucket=spec.input_bucket, input_prefix=spec.input_prefix,
        output_bucket=spec.output_bucket, output_prefix=spec.output_prefix)
    role_arn = d.role(scope)
    d.log_group()
    variables: dict[str, str] = {}
    if model_uri:
        variables[env.ENV_MODEL] = model_uri
        if model_version:
            variables[env.ENV_MODEL_VERSION] = model_version
    if spec.input_bucket and spec.output_bucket:
        variables.update({env.ENV_INPUT_BUCKET: spec.input_bucket, env.ENV_OUTPUT_BUCKET: spec.output_bucket})
        if spec.input_prefix:
            variables[env.ENV_INPUT_PREFIX] = spec.input_prefix
        if spec.output_prefix:
            variables[env.ENV_OUTPUT_PREFIX] = spec.output_prefix
    extra = {TAG_MODEL: spec.model if "://" in spec.model else Path(spec.model).name}
    if spec.input_bucket and spec.output_bucket:
        extra.update({TAG_INPUT: spec.input_bucket, TAG_OUTPUT: spec.output_bucket})
    if model_bucket:
        extra[TAG_MODEL_BUCKET] = model_bucket
    previous_input = ((previous or {}).get("Tags") or {}).get(TAG_INPUT)
    d.function(image, role_arn, variables, extra, previous)
    d.provisioned(d.alias() if previous is not None else None)
    existing = d.statements()
    keep: set[str] = set()
    url, auth = d.url(existing, keep)
    d.trigger(existing, keep, previous_input)
    schedule = d.schedule(existing, keep)
    d.drop_permissions(existing, keep)
    return DeployResult(
        name=spec.name, region=aws.region, function_arn=d.function_arn, image=image, role_arn=role_arn,
        model=model_uri or f"{spec.model} (baked into the image)", model_version=model_version,
        url=url, url_auth=auth, schedule=schedule, provisioned=spec.provisioned,
        input=f"s3://{spec.input_bucket}/{spec.input_prefix}" if spec.input_bucket else None,
        output=f"s3://{spec.output_bucket}/{spec.output_prefix}" if spec.output_bucket else None,
        changes=d.changes, warnings=list(spec.warnings))
