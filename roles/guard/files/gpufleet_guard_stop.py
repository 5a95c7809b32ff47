# Copyright: gpufleet developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Stop or reboot this instance through its cloud's official SDK: the
guard's final action ``stop``, and the repair ladder's reboot; and read
the maintenance the cloud has scheduled for it (``events``), where the
cloud documents that through its API only.

- Alibaba Cloud: ECS StopInstance with StoppedMode StopCharging;
  RebootInstance (ForceStop false);
- Tencent Cloud: CVM StopInstances with StoppedMode STOP_CHARGING;
  RebootInstances (StopType SOFT_FIRST: a forced one where the soft one
  fails);
- Huawei Cloud: ECS BatchStopServers and BatchRebootServers (soft);
- AWS: EC2 StopInstances; RebootInstances.

Events: ECS DescribeInstanceHistoryEvents (the instance's events in
Scheduled, Executing or Inquiring), CVM DescribeTaskInfo (its repair tasks
pending authorization, in progress or scheduled), ECS ListScheduledEvents
(inquiring, scheduled, executing); every page. It prints them as the SDK
returns them (gpufleet_guard_maintenance reads them); AWS's are in the
instance's metadata, which the guard reads itself.

    /opt/gpufleet/guard-sdk/bin/python3 gpufleet_guard_stop.py /etc/gpufleet/guard/stop.json [stop|reboot|events]

The configuration is JSON: ``cloud``, ``region``, ``instance_id``, and
optionally ``endpoint`` (the API's URL; the SDK's own for the region when
empty), ``project_id`` (Huawei; the SDK looks it up by region when empty),
``timeout`` (seconds per call) and ``credentials`` (``access_key_id``,
``secret_access_key``, ``security_token``). Without credentials the SDK's
own chain finds them: on a node, the instance's role (RAM role, CAM role,
agency, instance profile).

Once only: it reads the instance's state first and calls stop only where
the instance is neither stopping nor stopped, and a stop refused because
the instance is already stopping or stopped counts as done. A run repeated
after a daemon restart, or after an answer that was lost on the way, never
stops the instance a second time. A reboot is called only on a running
instance; one already rebooting (or starting) is left to it, and one that
is stopped is refused, as a reboot cannot start it. That a reboot already
went through cannot be read from the instance's state afterwards: the
ladder that asks for it records the call and the boot it came from.

Exit status, which the guard's retries read:
- 0: stopped, or already stopping or stopped; rebooted; the events read;
- 1: try again: throttled, unreachable, timed out, the cloud's server
  error, or a state it could not read;
- 2: refused, and trying again will not help: the credentials, a missing
  permission, an instance the cloud does not know, a bad configuration.

It prints one JSON line: the outcome, the state read and the calls made.
"""

from __future__ import annotations

import json
import sys

from gpufleet_clouds import CLOUDS, listed

RETRY, REFUSED = 1, 2
# The states after which there is nothing to stop, in each cloud's own words.
STOPPED = {
    "aws": {"stopping": "stopping", "stopped": "stopped", "shutting-down": "stopping", "terminated": "stopped"},
    "aliyun": {"Stopping": "stopping", "Stopped": "stopped"},
    "tencent": {"STOPPING": "stopping", "STOPPED": "stopped", "SHUTDOWN": "stopped", "TERMINATING": "stopping"},
    "huawei": {"SHUTOFF": "stopped", "DELETED": "stopped", "SOFT_DELETED": "stopped"},
}
# A reboot needs the instance running; one on its way back is left to it.
RUNNING = {"aws": "running", "aliyun": "Running", "tencent": "RUNNING", "huawei": "ACTIVE"}
REBOOTING = {"aws": ("pending",), "aliyun": ("Starting",), "tencent": ("REBOOTING", "STARTING"),
             "huawei": ("REBOOT", "HARD_REBOOT")}
ACTIONS = ("stop", "reboot", "events")
# The most pages of events read: a node has a handful at most.
EVENT_PAGES = 10


class StopError(Exception):
    """A call that failed; ``retry`` says whether another try can help."""

    def __init__(self, message: str, retry: bool, code: str = ""):
        super().__init__(message)
        self.retry = retry
        self.code = code


def _split(endpoint: str) -> tuple[str, str]:
    scheme, _separator, host = endpoint.rpartition("://")
    return (scheme or "https"), host.rstrip("/")


class Aliyun:
    # Error codes that another try can cure; the rest (credentials,
    # permissions, a parameter) it cannot.
    TRANSIENT = ("Throttling", "ServiceUnavailable", "InternalError", "UnknownError")
    ALREADY = ("IncorrectInstanceStatus",)

    def __init__(self, config: dict):
        # pylint: disable=import-outside-toplevel
        from alibabacloud_credentials.client import Client as CredentialClient
        from alibabacloud_credentials.models import Config as CredentialConfig
        from alibabacloud_ecs20140526 import models
        from alibabacloud_ecs20140526.client import Client
        from alibabacloud_tea_openapi import utils_models
        from Tea.exceptions import TeaException
        self.models, self.sdk_error = models, TeaException
        keys = config.get("credentials")
        credential = CredentialClient(CredentialConfig(
            type="sts" if keys.get("security_token") else "access_key", access_key_id=keys["access_key_id"],
            access_key_secret=keys["secret_access_key"], security_token=keys.get("security_token"),
        )) if keys else CredentialClient()
        ms = int(config["timeout"] * 1000)
        sdk_config = utils_models.Config(credential=credential, region_id=config["region"],
                                         connect_timeout=ms, read_timeout=ms)
        if config.get("endpoint"):
            sdk_config.protocol, sdk_config.endpoint = _split(config["endpoint"])
        self.client, self.region, self.instance = Client(sdk_config), config["region"], config["instance_id"]

    def _call(self, method, request):
        try:
            return getattr(self.client, method)(request).body
        except self.sdk_error as exc:
            status = getattr(exc, "status_code", None)
            code = exc.code or ""
            retry = status is None or status >= 500 or code.startswith(self.TRANSIENT)
            raise StopError(f"{method}: {code} {exc.message}", retry=retry, code=code) from exc
        except Exception as exc:  # pylint: disable=broad-exception-caught
            # Transport errors the SDK lets through unwrapped (sockets, timeouts).
            raise StopError(f"{method}: {type(exc).__name__}: {exc}", retry=True) from exc

    def state(self) -> str:
        body = self._call("describe_instances", self.models.DescribeInstancesRequest(
            region_id=self.region, instance_ids=json.dumps([self.instance])))
        if body.instances is None or body.instances.instance is None:
            raise StopError("DescribeInstances: an answer without its instance list", retry=True)
        found = body.instances.instance
        if not found:
            raise StopError(f"DescribeInstances: {self.instance} is not in {self.region}", retry=False)
        return found[0].status

    def stop(self) -> None:
        self._call("stop_instance", self.models.StopInstanceRequest(
            instance_id=self.instance, stopped_mode="StopCharging", force_stop=False))

    def reboot(self) -> None:
        self._call("reboot_instance", self.models.RebootInstanceRequest(instance_id=self.instance, force_stop=False))

    def events(self) -> list:
        found = []
        for page in range(1, EVENT_PAGES + 1):
            body = self._call("describe_instance_history_events", self.models.DescribeInstanceHistoryEventsRequest(
                region_id=self.region, instance_id=self.instance, page_number=page, page_size=100,
                instance_event_cycle_status=["Scheduled", "Executing", "Inquiring"]))
            listed = body.instance_system_event_set
            if listed is None or listed.instance_system_event_type is None or body.total_count is None:
                raise StopError("DescribeInstanceHistoryEvents: an answer without its events or their count",
                                retry=True)
            found += [event.to_map() for event in listed.instance_system_event_type]
            if len(found) >= body.total_count or not listed.instance_system_event_type:
                return _counted("DescribeInstanceHistoryEvents", found, body.total_count)
        raise StopError(f"DescribeInstanceHistoryEvents: more than {EVENT_PAGES} pages", retry=False)


class Tencent:
    TRANSIENT = ("RequestLimitExceeded", "InternalError", "ServerError", "ClientNetworkError",
                 "OperationDenied.InstanceOperationInProgress")
    ALREADY = ("UnsupportedOperation.InstanceStateStopped", "UnsupportedOperation.InstanceStateStopping")

    def __init__(self, config: dict):
        # pylint: disable=import-outside-toplevel
        from tencentcloud.common.credential import Credential, DefaultCredentialProvider
        from tencentcloud.common.exception.tencent_cloud_sdk_exception import TencentCloudSDKException
        from tencentcloud.common.profile.client_profile import ClientProfile
        from tencentcloud.common.profile.http_profile import HttpProfile
        from tencentcloud.cvm.v20170312 import cvm_client, models
        self.models, self.sdk_error = models, TencentCloudSDKException
        keys = config.get("credentials")
        try:
            credential = (Credential(keys["access_key_id"], keys["secret_access_key"], keys.get("security_token"))
                          if keys else DefaultCredentialProvider().get_credentials())
        except TencentCloudSDKException as exc:
            raise StopError(f"no credentials: {exc.get_message()}", retry=False) from exc
        http = HttpProfile(reqTimeout=int(config["timeout"]))
        if config.get("endpoint"):
            http.scheme, http.endpoint = _split(config["endpoint"])
        self.client = cvm_client.CvmClient(credential, config["region"], ClientProfile(httpProfile=http))
        self.instance = config["instance_id"]

    def _call(self, method, request):
        try:
            return getattr(self.client, method)(request)
        except self.sdk_error as exc:
            code = exc.get_code() or ""
            raise StopError(f"{method}: {code} {exc.get_message()}", retry=code.startswith(self.TRANSIENT),
                            code=code) from exc
        except Exception as exc:  # pylint: disable=broad-exception-caught
            raise StopError(f"{method}: {type(exc).__name__}: {exc}", retry=True) from exc

    def state(self) -> str:
        request = self.models.DescribeInstancesRequest()
        request.InstanceIds = [self.instance]
        found = self._call("DescribeInstances", request).InstanceSet
        if found is None:
            raise StopError("DescribeInstances: an answer without its instance list", retry=True)
        if not found:
            raise StopError(f"DescribeInstances: {self.instance} is not in this region", retry=False)
        return found[0].InstanceState

    def stop(self) -> None:
        request = self.models.StopInstancesRequest()
        request.InstanceIds = [self.instance]
        request.StopType = "SOFT_FIRST"
        request.StoppedMode = "STOP_CHARGING"
        self._call("StopInstances", request)

    def reboot(self) -> None:
        request = self.models.RebootInstancesRequest()
        request.InstanceIds = [self.instance]
        request.StopType = "SOFT_FIRST"
        self._call("RebootInstances", request)

    def events(self) -> list:
        found = []
        for _page in range(EVENT_PAGES):
            request = self.models.DescribeTaskInfoRequest()
            request.InstanceIds = [self.instance]
            request.TaskStatus = [1, 2, 4]
            request.Limit, request.Offset = 100, len(found)
            answer = json.loads(self._call("DescribeTaskInfo", request).to_json_string())
            tasks, total = answer.get("RepairTaskInfoSet"), answer.get("TotalCount")
            if not isinstance(tasks, list) or not isinstance(total, int):
                raise StopError("DescribeTaskInfo: an answer without its repair tasks or their count", retry=True)
            found += tasks
            if len(found) >= total or not tasks:
                return _counted("DescribeTaskInfo", found, total)
        raise StopError(f"DescribeTaskInfo: more than {EVENT_PAGES} pages", retry=False)


class Huawei:
    # BatchStopServers accepts a stopped server: its job does nothing.
    ALREADY = ()

    def __init__(self, config: dict):
        # pylint: disable=import-outside-toplevel
        from huaweicloudsdkcore.auth.credentials import BasicCredentials
        from huaweicloudsdkcore.auth.provider import CredentialProviderChain
        from huaweicloudsdkcore.exceptions import exceptions
        from huaweicloudsdkcore.http.http_config import HttpConfig
        from huaweicloudsdkcore.region.region import Region
        from huaweicloudsdkecs import v2
        self.v2, self.exceptions = v2, exceptions
        keys = config.get("credentials")
        if keys:
            credentials = BasicCredentials(keys["access_key_id"], keys["secret_access_key"],
                                           config.get("project_id") or None)
            credentials = credentials.with_security_token(keys.get("security_token"))
        else:
            try:
                credentials = CredentialProviderChain.get_basic_credential_provider_chain().get_credentials()
            except Exception as exc:  # pylint: disable=broad-exception-caught
                raise StopError(f"no credentials: {exc}", retry=False) from exc
            credentials.project_id = credentials.project_id or config.get("project_id") or None
        if config.get("endpoint") and not config.get("project_id"):
            # The SDK asks IAM for the region's project id; a private
            # endpoint answers IAM too (as the emulator does).
            credentials = credentials.with_iam_endpoint(config["endpoint"])
        http = HttpConfig.get_default_config()
        http.timeout = (config["timeout"], config["timeout"])
        region, endpoint = config["region"], config.get("endpoint") or f"https://ecs.{config['region']}.myhuaweicloud.com"
        builder = (v2.EcsClient.new_builder().with_http_config(http).with_credentials(credentials)
                   .with_region(Region(region, endpoint)))
        # build() looks the project id up: a failure there is a failed call.
        self.client = self._call("build", builder.build)
        self.instance = config["instance_id"]

    def _call(self, method, call, *args):
        errors = self.exceptions
        try:
            return call(*args)
        except errors.ServiceResponseException as exc:
            retry = exc.status_code in (429,) or exc.status_code >= 500
            raise StopError(f"{method}: {exc.error_code} {exc.error_msg}", retry=retry, code=exc.error_code) from exc
        except errors.SdkException as exc:
            # ConnectionException, RequestTimeoutException and the rest of
            # the transport; a project id lookup that found nothing.
            retry = isinstance(exc, (errors.ConnectionException, errors.RequestTimeoutException))
            raise StopError(f"{method}: {type(exc).__name__}: {exc.error_msg}", retry=retry) from exc
        except Exception as exc:  # pylint: disable=broad-exception-caught
            raise StopError(f"{method}: {type(exc).__name__}: {exc}", retry=True) from exc

    def state(self) -> str:
        server = self._call("ShowServer", self.client.show_server, self.v2.ShowServerRequest(server_id=self.instance))
        if server.server is None or not server.server.status:
            raise StopError(f"ShowServer: no state for {self.instance}", retry=True)
        return server.server.status

    def stop(self) -> None:
        option = self.v2.BatchStopServersOption(servers=[self.v2.ServerId(id=self.instance)], type="SOFT")
        request = self.v2.BatchStopServersRequest(body=self.v2.BatchStopServersRequestBody(os_stop=option))
        self._call("BatchStopServers", self.client.batch_stop_servers, request)

    def reboot(self) -> None:
        option = self.v2.BatchRebootSeversOption(servers=[self.v2.ServerId(id=self.instance)], type="SOFT")
        request = self.v2.BatchRebootServersRequest(body=self.v2.BatchRebootServersRequestBody(reboot=option))
        self._call("BatchRebootServers", self.client.batch_reboot_servers, request)

    def events(self) -> list:
        found, marker = [], None
        for _page in range(EVENT_PAGES):
            request = self.v2.ListScheduledEventsRequest(instance_id=[self.instance], limit=100, marker=marker,
                                                         state=["inquiring", "scheduled", "executing"])
            answer = self._call("ListScheduledEvents", self.client.list_scheduled_events, request)
            if answer.events is None:
                raise StopError("ListScheduledEvents: an answer without its events", retry=True)
            found += [event.to_dict() for event in answer.events]
            marker = answer.page_info.next_marker if answer.page_info else None
            # The last page is a short one, or one that points nowhere on.
            if len(answer.events) < 100 or not marker:
                return found
        raise StopError(f"ListScheduledEvents: more than {EVENT_PAGES} pages", retry=False)


class Aws:
    TRANSIENT = ("RequestLimitExceeded", "Throttling", "Unavailable", "InternalError", "ServiceUnavailable")
    # EC2's StopInstances on a stopped instance is a success.
    ALREADY = ()

    def __init__(self, config: dict):
        # pylint: disable=import-outside-toplevel
        import boto3
        from botocore.config import Config
        from botocore.exceptions import BotoCoreError, ClientError
        self.client_error, self.core_error = ClientError, BotoCoreError
        keys = config.get("credentials") or {}
        self.client = boto3.client(
            "ec2", region_name=config["region"], endpoint_url=config.get("endpoint") or None,
            aws_access_key_id=keys.get("access_key_id"), aws_secret_access_key=keys.get("secret_access_key"),
            aws_session_token=keys.get("security_token"),
            # The guard retries with its own backoff, which the caller sees.
            config=Config(connect_timeout=config["timeout"], read_timeout=config["timeout"],
                          retries={"mode": "standard", "total_max_attempts": 1}))
        self.instance = config["instance_id"]

    def _call(self, method, **kwargs):
        try:
            return getattr(self.client, method)(**kwargs)
        except self.client_error as exc:
            error = exc.response.get("Error", {})
            code, status = error.get("Code", ""), exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
            retry = code.startswith(self.TRANSIENT) or status >= 500
            raise StopError(f"{method}: {code} {error.get('Message', '')}", retry=retry, code=code) from exc
        except self.core_error as exc:
            # NoCredentialsError is a refusal; the transport's errors are not.
            retry = type(exc).__name__ not in ("NoCredentialsError", "PartialCredentialsError", "NoRegionError")
            raise StopError(f"{method}: {type(exc).__name__}: {exc}", retry=retry) from exc

    def state(self) -> str:
        reservations = self._call("describe_instances", InstanceIds=[self.instance]).get("Reservations")
        if reservations is None:
            raise StopError("DescribeInstances: an answer without its reservations", retry=True)
        found = [i for r in reservations for i in r.get("Instances") or ()]
        if not found:
            raise StopError(f"DescribeInstances: {self.instance} is not in this region", retry=False)
        return found[0].get("State", {}).get("Name", "")

    def stop(self) -> None:
        # EC2's StopInstances on a stopped instance is a success: idempotent by itself.
        self._call("stop_instances", InstanceIds=[self.instance])

    def reboot(self) -> None:
        self._call("reboot_instances", InstanceIds=[self.instance])


def _counted(call: str, found: list, total: int) -> list:
    # A count above what the pages held: an event unread is not "none".
    if len(found) < total:
        raise StopError(f"{call}: TotalCount {total}, but the pages held {len(found)}", retry=True)
    return found


ADAPTERS = {"aws": Aws, "aliyun": Aliyun, "tencent": Tencent, "huawei": Huawei}


def load(path: str) -> dict:
    with open(path, encoding="utf-8") as handle:
        return load_config(json.load(handle))


def load_config(config: dict) -> dict:
    """The configuration, checked: a bad one is refused by name (exit 2)."""
    config = dict(config)
    if config.get("cloud") not in CLOUDS:
        raise StopError(f"cloud must be {listed()}, not {config.get('cloud')!r}", retry=False)
    for key in ("region", "instance_id"):
        if not config.get(key):
            raise StopError(f"{key} is empty: the guard cannot say which instance to stop", retry=False)
    keys = config.get("credentials") or None
    if keys is not None and not (keys.get("access_key_id") and keys.get("secret_access_key")):
        raise StopError("credentials need access_key_id and secret_access_key", retry=False)
    config["credentials"] = keys
    config["timeout"] = float(config.get("timeout") or 20)
    return config


def _state(config: dict, cloud) -> str:
    before = cloud.state()
    if not before:
        # The instance is listed without its state: unknown, not "running".
        raise StopError(f"the cloud lists {config['instance_id']} without its state", retry=True)
    return before


def reboot(config: dict, adapter=None) -> dict:
    """Reboot the running instance; the outcome, or StopError."""
    cloud = adapter or ADAPTERS[config["cloud"]](config)
    before = _state(config, cloud)
    if before in REBOOTING[config["cloud"]]:
        return {"outcome": "already rebooting", "state": before, "reboot_called": False}
    if before != RUNNING[config["cloud"]]:
        # Stopped, stopping, being built or deleted: a reboot starts none of them.
        raise StopError(f"{config['instance_id']} is {before}: a reboot needs it {RUNNING[config['cloud']]}",
                        retry=False)
    cloud.reboot()
    return {"outcome": "rebooted", "state": before, "reboot_called": True}


def stop(config: dict, adapter=None) -> dict:
    """Stop the instance once; the outcome, or StopError."""
    cloud = adapter or ADAPTERS[config["cloud"]](config)
    before = _state(config, cloud)
    if before in STOPPED[config["cloud"]]:
        return {"outcome": "already " + STOPPED[config["cloud"]][before], "state": before, "stop_called": False}
    try:
        cloud.stop()
    except StopError as exc:
        if not exc.code or not exc.code.startswith(cloud.ALREADY):
            raise
        # Refused for the instance's state: stopped by someone else between
        # the read and the call, or on its way somewhere. Read it again.
        after = cloud.state()
        if after not in STOPPED[config["cloud"]]:
            raise StopError(f"{exc}; the instance is {after}, not stopping", retry=True, code=exc.code) from exc
        return {"outcome": "already " + STOPPED[config["cloud"]][after], "state": after, "stop_called": True,
                "detail": str(exc)}
    return {"outcome": "stopped", "state": before, "stop_called": True}


def events(config: dict, adapter=None) -> dict:
    """The cloud's scheduled events for the instance, as its SDK gives them."""
    if config["cloud"] not in ("aliyun", "tencent", "huawei"):
        raise StopError(f"{config['cloud']} gives its scheduled events in the instance's metadata, "
                        "which the guard reads itself", retry=False)
    cloud = adapter or ADAPTERS[config["cloud"]](config)
    found = cloud.events()
    return {"outcome": "read", "events": found, "count": len(found)}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    action = argv[1] if len(argv) == 2 else "stop"
    if len(argv) not in (1, 2) or action not in ACTIONS:
        print(json.dumps({"outcome": "refused",
                          "detail": f"usage: gpufleet_guard_stop.py CONFIG.json [{'|'.join(ACTIONS)}]"}))
        return REFUSED
    report = {"config": argv[0], "action": action}
    try:
        config = load(argv[0])
        report.update(cloud=config["cloud"], region=config["region"], instance_id=config["instance_id"])
        report.update({"stop": stop, "reboot": reboot, "events": events}[action](config))
        code = 0
    except (OSError, ValueError) as exc:
        report.update(outcome="refused", detail=f"the configuration {argv[0]}: {exc}")
        code = REFUSED
    except ImportError as exc:
        report.update(outcome="refused", detail=f"the cloud's SDK is not installed: {exc}")
        code = REFUSED
    except StopError as exc:
        report.update(outcome="retry" if exc.retry else "refused", detail=str(exc))
        code = RETRY if exc.retry else REFUSED
    print(json.dumps(report, sort_keys=True))
    return code


if __name__ == "__main__":
    sys.exit(main())
