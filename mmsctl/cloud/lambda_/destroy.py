"""``mmsctl lambda destroy``: remove what deploy made, in reverse order, idempotently.

Order: the warm-up schedule, the S3 notifications (on the input bucket), the
function URL, provisioned concurrency and its alias, the function (its resource
policy goes with it), the log group, the dead-letter queue (kept while it holds failed events,
unless *delete_data*), the role, the buckets, the ECR images and then
the repository. Data is never deleted by default: an input or output bucket that holds
objects stays unless *delete_data* (the CLI asks first, naming the count); empty ones go,
and so does the model bucket, which holds only the archive deploy uploaded. Each
step reads first and skips what is gone, so a second destroy makes no change.
Only resources tagged ``mmsctl:lambda=NAME`` are deleted; a bucket of yours that
deploy only used is left alone, with just this function's notifications removed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from mmsctl.cloud.aws.errors import aws_code
from mmsctl.cloud.aws.log_group import log_group_tags
from mmsctl.cloud.aws.session import AwsSession
from mmsctl.cloud.aws.tags import LAMBDA_INPUT, LAMBDA_MODEL_BUCKET, LAMBDA_OUTPUT, as_dict
from mmsctl.cloud.lambda_ import spec as names
from mmsctl.cloud.lambda_.resources import NotOurAccount, bucket_tags, function_or_none, ours
from mmsctl.errors import CloudError

__all__ = ["DestroyResult", "data_buckets", "destroy", "failure_queue"]

_BATCH = 1000  # DeleteObjects takes at most 1000 keys


@dataclass
class DestroyResult:
    name: str
    region: str
    deleted: list[dict[str, str]] = field(default_factory=list)
    kept: list[dict[str, str]] = field(default_factory=list)

    def gone(self, kind: str, id: str) -> None:
        self.deleted.append({"kind": kind, "id": id})

    def keep(self, kind: str, id: str, why: str) -> None:
        self.kept.append({"kind": kind, "id": id, "why": why})

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "region": self.region, "deleted": self.deleted, "kept": self.kept}


def _missing(exc: CloudError, *codes: str) -> bool:
    return aws_code(exc) in codes or aws_code(exc) in ("ResourceNotFoundException", "NoSuchEntity", "404")


def _buckets(aws: AwsSession, name: str, tags: dict[str, str]) -> list[str]:
    return [b for b in dict.fromkeys([tags.get(LAMBDA_OUTPUT), tags.get(LAMBDA_INPUT), tags.get(LAMBDA_MODEL_BUCKET),
                                      *_tagged_buckets(aws, name)]) if b]


def data_buckets(aws: AwsSession, name: str) -> dict[str, int]:
    """The buckets destroy would delete only with *delete_data*: ours, not the model bucket, holding objects
    (bucket -> how many object versions and delete markers)."""
    function = function_or_none(aws, name)
    tags = (function or {}).get("Tags") or {}
    model_bucket = tags.get(LAMBDA_MODEL_BUCKET)
    if model_bucket is None and aws.unlooked is None:  # a destroy that stopped half-way: the function is gone
        model_bucket = names.model_bucket_name(name, aws.account_id(), aws.region)
    found: dict[str, int] = {}
    for bucket in _buckets(aws, name, tags):
        bucket_tag = _own_bucket_tags(aws, bucket)
        if bucket_tag is None or not ours(bucket_tag, name) or bucket == model_bucket:
            continue
        count = _count(aws, bucket)
        if count:
            found[bucket] = count
    return found


def _count(aws: AwsSession, bucket: str) -> int:
    return sum(1 for key in ("Versions", "DeleteMarkers")
               for _ in aws.paginate("s3", "list_object_versions", key, Bucket=bucket))


def destroy(aws: AwsSession, name: str, *, keep_data: bool = False, delete_data: bool = False) -> DestroyResult:
    """Remove deployment *name*; see the module docstring.

    Raises:
        CloudError: a function NAME exists that mmsctl did not deploy, or AWS refused a call.
    """
    names.check_function_name(name)
    result = DestroyResult(name, aws.region)
    function = function_or_none(aws, name)
    tags: dict[str, str] = {}
    if function is not None:
        tags = function.get("Tags") or {}
        if not ours(tags, name):
            raise CloudError(f"function {name} was not deployed by mmsctl (no mmsctl:lambda={name} tag); "
                             "refusing to delete it")
    _schedule(aws, name, result)
    if tags.get(LAMBDA_INPUT):
        _notifications(aws, name, tags[LAMBDA_INPUT], result)
    if function is not None:
        _function(aws, name, result)
    _log_group(aws, name, result)
    _failure_queue(aws, name, delete_data, result)
    _role(aws, name, result)
    holding = {} if delete_data or keep_data else data_buckets(aws, name)
    for bucket in _buckets(aws, name, tags):
        if bucket in holding:
            result.keep("bucket", bucket, f"holds {holding[bucket]} object{'s' * (holding[bucket] != 1)}: data is kept unless asked")
        else:
            _bucket(aws, name, bucket, keep_data, result)
    _repository(aws, name, result)
    return result


def _schedule(aws: AwsSession, name: str, result: DestroyResult) -> None:
    rule = names.rule_name(name)
    try:
        found = aws.call("events", "describe_rule", Name=rule)
    except CloudError as exc:
        if _missing(exc):
            return
        raise
    rule_tags = as_dict(aws.call("events", "list_tags_for_resource", ResourceARN=found["Arn"]).get("Tags"))
    if not ours(rule_tags, name):
        result.keep("schedule", rule, "not tagged mmsctl:lambda")
        return
    targets = aws.call("events", "list_targets_by_rule", Rule=rule).get("Targets", [])
    if targets:
        aws.call("events", "remove_targets", Rule=rule, Ids=[t["Id"] for t in targets])
    aws.call("events", "delete_rule", Name=rule)
    result.gone("schedule", rule)


def _notifications(aws: AwsSession, name: str, bucket: str, result: DestroyResult) -> None:
    try:
        current = aws.call("s3", "get_bucket_notification_configuration", Bucket=bucket)
    except CloudError as exc:
        if aws_code(exc) in ("NoSuchBucket", "404"):
            return
        raise
    prefix = names.notification_prefix(name)
    config = {k: v for k, v in current.items()
              if k in ("TopicConfigurations", "QueueConfigurations", "LambdaFunctionConfigurations",
                       "EventBridgeConfiguration")}
    lambdas = config.get("LambdaFunctionConfigurations", [])
    left = [c for c in lambdas if not str(c.get("Id", "")).startswith(prefix)]
    if len(left) == len(lambdas):
        return
    if left:
        config["LambdaFunctionConfigurations"] = left
    else:
        config.pop("LambdaFunctionConfigurations", None)
    aws.call("s3", "put_bucket_notification_configuration", Bucket=bucket, NotificationConfiguration=config)
    result.gone("s3-notification", f"s3://{bucket} ({len(lambdas) - len(left)} filters)")


def _function(aws: AwsSession, name: str, result: DestroyResult) -> None:
    qualifiers: tuple[dict[str, Any], ...] = ({}, {"Qualifier": names.ALIAS})
    for qualifier in qualifiers:
        try:
            url = aws.call("lambda", "get_function_url_config", FunctionName=name, **qualifier)
        except CloudError as exc:
            if not _missing(exc):
                raise
            continue
        aws.call("lambda", "delete_function_url_config", FunctionName=name, **qualifier)
        result.gone("function-url", str(url.get("FunctionUrl")))
    try:
        aws.call("lambda", "get_alias", FunctionName=name, Name=names.ALIAS)
    except CloudError as exc:
        if not _missing(exc):
            raise
    else:
        try:
            aws.call("lambda", "delete_provisioned_concurrency_config", FunctionName=name, Qualifier=names.ALIAS)
        except CloudError as exc:
            if not _missing(exc, "ProvisionedConcurrencyConfigNotFoundException"):
                raise
        aws.call("lambda", "delete_alias", FunctionName=name, Name=names.ALIAS)
        result.gone("lambda-alias", f"{name}:{names.ALIAS}")
    aws.call("lambda", "delete_function", FunctionName=name)
    result.gone("lambda-function", name)


def _role(aws: AwsSession, name: str, result: DestroyResult) -> None:
    role = names.role_name(name)
    try:
        found = aws.call("iam", "get_role", RoleName=role)["Role"]
    except CloudError as exc:
        if _missing(exc):
            return
        raise
    if not ours(as_dict(found.get("Tags")), name):
        result.keep("iam-role", role, "not tagged mmsctl:lambda")
        return
    for policy in aws.paginate("iam", "list_role_policies", "PolicyNames", RoleName=role):
        aws.call("iam", "delete_role_policy", RoleName=role, PolicyName=policy)
    for attached in aws.paginate("iam", "list_attached_role_policies", "AttachedPolicies", RoleName=role):
        aws.call("iam", "detach_role_policy", RoleName=role, PolicyArn=attached["PolicyArn"])
    aws.call("iam", "delete_role", RoleName=role)
    result.gone("iam-role", role)


def _log_group(aws: AwsSession, name: str, result: DestroyResult) -> None:
    group = names.log_group_name(name)
    group_tags = log_group_tags(aws, group)
    if group_tags is None:
        return
    if not ours(group_tags, name):
        result.keep("log-group", group, "not tagged mmsctl:lambda")
        return
    aws.call("logs", "delete_log_group", logGroupName=group)
    result.gone("log-group", group)


def _tagged_buckets(aws: AwsSession, name: str) -> list[str]:
    """Buckets tagged for *name* (the Resource Groups Tagging API), so a destroy that stopped half-way finds them."""
    found = aws.paginate("resourcegroupstaggingapi", "get_resources", "ResourceTagMappingList",
                         TagFilters=[{"Key": "mmsctl:lambda", "Values": [name]}], ResourceTypeFilters=["s3"])
    return [str(r["ResourceARN"]).rsplit(":", 1)[-1] for r in found]


def _own_bucket_tags(aws: AwsSession, bucket: str) -> Optional[dict[str, str]]:
    """The bucket's tags; None where there is no such bucket, or it is now another account's (never touched)."""
    try:
        return bucket_tags(aws, bucket)
    except NotOurAccount:
        return None


def _bucket(aws: AwsSession, name: str, bucket: str, keep_data: bool, result: DestroyResult) -> None:
    try:
        found = bucket_tags(aws, bucket)
    except NotOurAccount:
        result.keep("bucket", bucket, "another account's now: not touched")
        return
    if found is None:
        return
    if not ours(found, name):
        result.keep("bucket", bucket, "yours: deploy only used it")
        return
    if keep_data:
        result.keep("bucket", bucket, "data kept, as asked")
        return
    _empty(aws, bucket)
    aws.call("s3", "delete_bucket", Bucket=bucket)
    result.gone("bucket", bucket)


def _empty(aws: AwsSession, bucket: str) -> None:
    """Delete every object version and delete marker (a versioned bucket is not empty until then);
    in an unversioned bucket each object is listed as version ``null``."""
    batch: list[dict[str, Any]] = []
    for page_key in ("Versions", "DeleteMarkers"):
        for item in aws.paginate("s3", "list_object_versions", page_key, Bucket=bucket):
            entry: dict[str, Any] = {"Key": item["Key"]}
            if item.get("VersionId") and item["VersionId"] != "null":
                entry["VersionId"] = item["VersionId"]
            batch.append(entry)
            if len(batch) == _BATCH:
                aws.call("s3", "delete_objects", Bucket=bucket, Delete={"Objects": batch, "Quiet": True})
                batch = []
    if batch:
        aws.call("s3", "delete_objects", Bucket=bucket, Delete={"Objects": batch, "Quiet": True})


def _repository(aws: AwsSession, name: str, result: DestroyResult) -> None:
    repo = names.repository_name(name)
    try:
        found = aws.call("ecr", "describe_repositories", repositoryNames=[repo])["repositories"][0]
    except CloudError as exc:
        if _missing(exc, "RepositoryNotFoundException"):
            return
        raise
    repo_tags = as_dict(aws.call("ecr", "list_tags_for_resource", resourceArn=found["repositoryArn"]).get("tags"))
    if not ours(repo_tags, name):
        result.keep("ecr-repository", repo, "not tagged mmsctl:lambda")
        return
    images = aws.paginate("ecr", "list_images", "imageIds", repositoryName=repo)
    for start in range(0, len(images), 100):  # BatchDeleteImage takes at most 100 ids
        aws.call("ecr", "batch_delete_image", repositoryName=repo, imageIds=images[start:start + 100])
    if images:
        result.gone("ecr-images", f"{repo} ({len(images)})")
    aws.call("ecr", "delete_repository", repositoryName=repo)
    result.gone("ecr-repository", repo)


def failure_queue(aws: AwsSession, name: str) -> Optional[tuple[str, str, Optional[int]]]:
    """Deploy's dead-letter queue for *name*, if it exists: (name, URL, failed events it holds), the count
    None when the queue is not tagged for *name* (someone else's: never deleted)."""
    from mmsctl.cloud.lambda_.failures import default_queue_name

    queue = default_queue_name(name)
    try:
        url = aws.call("sqs", "get_queue_url", QueueName=queue)["QueueUrl"]
    except CloudError as exc:
        if aws_code(exc) in ("AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist", "ResourceNotFoundException"):
            return None
        raise
    if (aws.call("sqs", "list_queue_tags", QueueUrl=url).get("Tags") or {}).get("mmsctl:lambda") != name:
        return queue, url, None
    attributes = aws.call("sqs", "get_queue_attributes", QueueUrl=url, AttributeNames=[
        "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]).get("Attributes") or {}
    return queue, url, sum(int(attributes.get(k, 0) or 0) for k in ("ApproximateNumberOfMessages",
                                                                    "ApproximateNumberOfMessagesNotVisible"))


def _failure_queue(aws: AwsSession, name: str, delete_data: bool, result: DestroyResult) -> None:
    """Our dead-letter queue: deleted when empty (or asked), kept while it holds failed events."""
    found = failure_queue(aws, name)
    if found is None:
        return
    queue, url, held = found
    if held is None:
        result.keep("sqs-queue", queue, "not tagged mmsctl:lambda")
        return
    if held and not delete_data:
        result.keep("sqs-queue", queue, f"holds {held} failed event{'s' * (held != 1)}: data is kept unless asked")
        return
    aws.call("sqs", "delete_queue", QueueUrl=url)
    result.gone("sqs-queue", queue)
