"""The shared discovery flow, with a fake adapter: parallel regions,
isolation of a failing region, region discovery, safe error text."""

from __future__ import annotations

import threading

import pytest

from ansible_collections.gpufleet.cloud.plugins.module_utils import _discovery as d
from ansible_collections.gpufleet.cloud.plugins.module_utils import _gpu_record as gr


class FakeAdapter(d.Adapter):
    provider = "aws"
    region_example = "us-east-1"

    def __init__(self, regions, failing=(), barrier=None, secret="s3cr3t-value"):
        super().__init__(d.Settings(credentials={"access_key": "AKIAFAKE", "secret_key": secret}))
        self.regions = regions
        self.failing = set(failing)
        self.barrier = barrier
        self.active = 0
        self.most_active = 0
        self.credential_checks = 0

    def check_credentials(self):
        self.credential_checks += 1

    def list_regions(self):
        return self.regions

    def list_records(self, region):
        with self._lock:
            self.active += 1
            self.most_active = max(self.most_active, self.active)
        try:
            if self.barrier:
                # Every worker must arrive here before any leaves: proof
                # that the regions really run at the same time.
                self.barrier.wait(timeout=10)
            if region in self.failing:
                raise RuntimeError("region %s is down (key s3cr3t-value)" % region)
            return [gr.make_record("aws", region, "i-%s-%d" % (region, n)) for n in (2, 1)]
        finally:
            with self._lock:
                self.active -= 1


REGIONS = ["us-east-1", "us-west-2", "eu-west-1", "ap-south-1"]


def test_regions_run_in_parallel_up_to_the_worker_bound():
    adapter = FakeAdapter(REGIONS, barrier=threading.Barrier(4))
    result = d.discover(adapter, REGIONS, workers=4)
    assert adapter.most_active == 4
    assert len(result.records) == 8 and result.complete

    bounded = FakeAdapter(REGIONS * 2)
    d.discover(bounded, [], workers=2)
    assert bounded.most_active <= 2


def test_a_failing_region_leaves_the_others_listed():
    adapter = FakeAdapter(REGIONS, failing={"eu-west-1"})
    result = d.discover(adapter, REGIONS)
    assert [f.region for f in result.failures] == ["eu-west-1"]
    assert "region eu-west-1 is down" in result.failures[0].error
    assert {r["region"] for r in result.records} == set(REGIONS) - {"eu-west-1"}
    assert not result.complete


def test_errors_never_show_a_configured_secret():
    adapter = FakeAdapter(REGIONS, failing={"us-east-1"})
    error = d.discover(adapter, ["us-east-1"]).failures[0].error
    assert "s3cr3t-value" not in error and "********" in error


def test_empty_regions_are_discovered():
    adapter = FakeAdapter(["us-west-2", "us-east-1"])
    result = d.discover(adapter, [])
    assert result.regions == ["us-east-1", "us-west-2"]
    # Sorted output: by region, then instance id.
    assert [r["instance_id"] for r in result.records] == [
        "i-us-east-1-1", "i-us-east-1-2", "i-us-west-2-1", "i-us-west-2-2"]


def test_credentials_are_checked_once_before_any_region():
    adapter = FakeAdapter(REGIONS)
    d.discover(adapter, REGIONS)
    assert adapter.credential_checks == 1


@pytest.mark.parametrize("regions", [["us_east_1"], ["US-EAST-1"], ["east"], [""], [42]])
def test_bad_region_names_name_the_option(regions):
    with pytest.raises(d.ConfigError, match="option 'regions'.*expected a name like us-east-1") as info:
        d.discover(FakeAdapter(REGIONS), regions)
    assert info.value.option == "regions"


def test_workers_must_be_positive():
    with pytest.raises(d.ConfigError, match="option 'workers'"):
        d.discover(FakeAdapter(REGIONS), REGIONS, workers=0)


def test_a_region_list_failure_is_a_discovery_error():
    class NoRegions(FakeAdapter):
        def list_regions(self):
            raise RuntimeError("DescribeRegions denied")
    with pytest.raises(d.DiscoveryError, match="could not discover the regions.*DescribeRegions denied"):
        d.discover(NoRegions(REGIONS), [])


@pytest.mark.parametrize("endpoint, parts", [
    ("http://127.0.0.1:8080", ("http", "127.0.0.1:8080")),
    ("ecs.cn-hangzhou.aliyuncs.com", ("https", "ecs.cn-hangzhou.aliyuncs.com")),
    ("https://ecs-vpc.cn-beijing.aliyuncs.com/", ("https", "ecs-vpc.cn-beijing.aliyuncs.com")),
])
def test_endpoints_are_split_into_scheme_and_host(endpoint, parts):
    assert d.split_endpoint(endpoint) == parts


def test_an_endpoint_with_a_path_is_refused():
    with pytest.raises(d.ConfigError, match="option 'endpoint'"):
        d.split_endpoint("http://127.0.0.1:8080/some/path")


def test_region_placeholder_in_the_endpoint():
    adapter = FakeAdapter(REGIONS)
    adapter.settings.endpoint = "https://ec2.{region}.example.internal"
    assert adapter.endpoint_for("eu-west-1") == "https://ec2.eu-west-1.example.internal"


class TypedAdapter(d.Adapter):
    """The real list_records flow over two pages, with a type lookup that
    fails like EC2's: the whole call, for any batch holding a bad type."""

    provider = "aws"
    region_example = "us-east-1"

    def __init__(self, pages, bad=(), throttled=False):
        super().__init__(d.Settings(retries=1, policy=d.RetryPolicy(attempts=2, sleep=lambda _s: None)))
        self._pages = pages
        self.bad = set(bad)
        self.throttled = throttled
        self.lookups = []

    def check_credentials(self):
        pass

    def client(self, region):
        return None

    def pages(self, client, region):
        return iter(self._pages)

    def instance_type_of(self, raw):
        return raw[1]

    def lookup_types(self, client, region, names):
        def lookup():
            self.lookups.append(list(names))
            if self.throttled:
                raise RuntimeError("Throttling")
            refused = sorted(self.bad & set(names))
            if refused:
                raise RuntimeError("InvalidInstanceType: %s" % ", ".join(refused))
            return {n: {"model": "H100", "count": 8} for n in names if n.startswith("p")}
        return self.call(lookup)

    def record(self, region, raw, type_info):
        gpu = gr.unknown_gpu() if type_info is None else gr.gpu_info(type_info.get("model"), type_info.get("count"))
        return gr.make_record("aws", region, raw[0], instance_type=raw[1], gpu=gpu, charge_type="on_demand",
                              gpu_source="unknown" if type_info is None else "api")

    def is_throttled(self, exc):
        return str(exc) == "Throttling"


PAGES = [[("i-1", "p5"), ("i-2", "p4d"), ("i-3", "p3")], [("i-4", "p6"), ("i-5", "p5"), ("i-6", "x9")]]


def test_a_bad_type_in_a_lookup_is_split_out_and_every_instance_kept():
    adapter = TypedAdapter(PAGES, bad={"p3"})
    result = d.discover(adapter, ["us-east-1"])
    by_id = {r["instance_id"]: r for r in result.records}
    assert sorted(by_id) == ["i-1", "i-2", "i-3", "i-4", "i-5", "i-6"] and result.complete
    assert by_id["i-3"]["gpu"]["count"] is None and by_id["i-3"]["gpu_source"] == "unknown"
    assert by_id["i-1"]["gpu"]["count"] == 8 and by_id["i-2"]["gpu_source"] == "api"
    # x9 was looked up and is not a GPU type of this fake API: unknown too,
    # because the API gave no data for it.
    assert by_id["i-6"]["gpu_source"] == "unknown"
    # Each page's new types once; the bad one split out by halving; p5 is
    # not asked again on the second page.
    assert adapter.lookups == [["p3", "p4d", "p5"], ["p3"], ["p4d", "p5"], ["p6", "x9"]]
    messages = [w.message for w in result.warnings]
    assert any("looking up instance types p3 failed" in m and "InvalidInstanceType: p3" in m for m in messages)
    assert any("no GPU data for 1 instance(s) (i-3)" in m for m in messages)


def test_a_lookup_throttled_past_its_retries_is_not_split():
    adapter = TypedAdapter(PAGES[:1], throttled=True)
    result = d.discover(adapter, ["us-east-1"])
    assert len(result.records) == 3 and result.complete
    assert all(r["gpu_source"] == "unknown" for r in result.records)
    # Two attempts (retries=1) of the one batch, and no smaller batches.
    assert adapter.lookups == [["p3", "p4d", "p5"]] * 2
    assert any("ThrottledError" in w.message for w in result.warnings)


def test_no_warning_when_every_lookup_answers():
    result = d.discover(TypedAdapter([[("i-1", "p5")]]), ["us-east-1"])
    assert result.warnings == [] and result.records[0]["gpu_source"] == "api"


class Refused(Exception):
    """An SDK's error with the code a cloud refuses credentials with."""

    code = "AuthFailure"


class RefusingAdapter(FakeAdapter):
    """Refuses the credentials in some regions (AWS does so in an opt-in
    region the account has not enabled), wrapped as a listing wraps it."""

    cloud_name = "AWS"
    key_options = ("access_key", "secret_key")
    key_env = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
    other_sources = "a profile"
    auth_error_codes = frozenset(("AuthFailure",))

    def __init__(self, regions, refusing):
        super().__init__(regions)
        self.refusing = set(refusing)

    def list_records(self, region):
        if region in self.refusing:
            try:
                raise Refused("not validated (key s3cr3t-value)")
            except Refused as exc:
                raise RuntimeError("page 1 failed") from exc
        return super().list_records(region)


def test_a_region_that_refuses_the_credentials_fails_alone_naming_the_options():
    adapter = RefusingAdapter(REGIONS, refusing={"eu-west-1"})
    result = d.discover(adapter, REGIONS)
    assert [f.region for f in result.failures] == ["eu-west-1"]
    failure = result.failures[0]
    assert isinstance(failure.rejected, d.CredentialsError)
    assert failure.error.startswith("AWS rejected the credentials of the access_key and secret_key options "
                                    "(AuthFailure: not validated (key ********))")
    assert {r["region"] for r in result.records} == set(REGIONS) - {"eu-west-1"}
    # Another region's failure is no refusal.
    assert d.discover(FakeAdapter(REGIONS, failing={"eu-west-1"}), REGIONS).failures[0].rejected is None


def test_credentials_refused_in_every_region_are_one_error():
    with pytest.raises(d.CredentialsError) as info:
        d.discover(RefusingAdapter(REGIONS, refusing=REGIONS), REGIONS)
    assert str(info.value).startswith("AWS rejected the credentials of the access_key and secret_key options")
    assert "s3cr3t-value" not in str(info.value) + info.value.detail


class UnpricedAdapter(TypedAdapter):
    """Records whose billing value the adapter could not map (i-2)."""

    def record(self, region, raw, type_info):
        record = super().record(region, raw, type_info)
        if raw[0] == "i-2":
            record["charge_type"], record["spot"] = "unknown", False
        return record


def test_an_unknown_charge_type_is_named_in_a_warning_and_the_host_kept():
    result = d.discover(UnpricedAdapter(PAGES[:1]), ["us-east-1"])
    assert len(result.records) == 3 and result.complete
    [warning] = result.warnings
    assert warning.region == "us-east-1" and not warning.strict
    assert warning.message.startswith("no known charge type for 1 instance(s) (i-2): ")
