"""moto's server with a fault-injection middleware in front of it (what tests/moto/moto.sh starts).

moto never returns capacity errors or throttling, and its CreateFleet gives the whole capacity to the
first override of the first launch template config whatever the Priority. This WSGI middleware wraps
moto's own app (the same `DomainDispatcherApplication` `moto_server` serves) and adds, on the same port:

    POST /stowage/ice       {"instanceType": "m5.large", "zone": "us-east-1a", "capacityType": "on-demand",
                             "code": "InsufficientInstanceCapacity", "message": "..."}
        Every field is optional (missing = any). From now on, CreateFleet overrides that match are removed
        from the request before moto sees it, and the response gets one `Errors[]` entry per removed
        override (ErrorCode `code`, default InsufficientInstanceCapacity), as EC2 reports them. If no
        override is left, the response is a 200 with zero instances and only those errors, like EC2's.
    POST /stowage/throttle  {"action": "CreateFleet", "count": 3, "code": "RequestLimitExceeded", "status": 503}
        The next `count` requests for `action` (missing = any EC2 action) fail with that error code and
        HTTP status (defaults RequestLimitExceeded / 503, as EC2 throttles) without reaching moto.
    POST /stowage/faults    {"rate": 0.1, "seed": 42, "actions": ["CreateFleet", ...], "userAgent": "app/x",
                             "errors": [{"code": "RequestLimitExceeded", "status": 503},
                                        {"code": "InternalError", "status": 500}]}
        Random faults from now on (replaces the previous random rule; rate 0 turns them off): each
        EC2 request whose action is in `actions` (missing = any) and whose User-Agent or
        X-Amz-User-Agent contains `userAgent` (missing = any client) fails, with probability `rate`,
        with one of `errors` (default: the two above, EC2's throttling and 5xx), without reaching
        moto. The draws come from Python's `random.Random(seed)` in request order, so a seed fixes
        the sequence of faults for a given sequence of requests.
    POST /stowage/prices    {"region": "eu-west-1", "prices": {"m5.large": 0.107}, "metalPrices": {"m5.metal": 5.136}}
        moto has no AWS Price List API: from now on `AWSPriceListService.GetProducts` (JSON 1.1, any host) is
        answered here, from the prices seeded per region (shared-tenancy instances, and bare metal for the
        Dedicated / "Compute Instance (bare metal)" query), as Price List items in the API's JSON shape,
        `MaxResults` per page with a `NextToken`. Filters other than Karpenter's on-demand Linux ones match
        nothing. Throttle and fault rules apply (action `GetProducts`, a JSON error). Each call's signing
        region (the Price List endpoint the client chose) is listed in `/stowage/state` `pricingRegions`.
    POST /stowage/ssm       {"parameters": {"/aws/service/eks/optimized-ami/1.31/...": "ami-...", ...}}
        Writes public SSM parameters (String, data type aws:ec2:image when the value is an AMI id)
        straight into moto's SSM backend (us-east-1, moto's default account) in this process: moto's
        PutParameter refuses names under /aws/, as AWS does, and moto has no EKS or Bottlerocket AMI
        parameters of its own. A name written again gets a new version. Answers {"written": n}.
    POST /stowage/capacity-reservations
                            {"reservations": [{"id": "cr-0a1b", "instanceType": "m5.large", "zone": "us-east-1a",
                              "count": 2, "ownerId": "123456789012", "tags": {"team": "ml"},
                              "matchCriteria": "targeted", "type": "default", "interruptible": false,
                              "endDate": "2030-01-01T00:00:00Z"}]}
        moto has no capacity reservations. Seeds them (an id seeded again is replaced); from now on
        `DescribeCapacityReservations` is answered here from them in EC2's XML (CapacityReservationId.N,
        and the filters state, owner-id, tag:<k>, tag-key, instance-match-criteria, instance-type,
        availability-zone; NextToken paging over MaxResults), with `availableInstanceCount` as it is now.
        A CreateFleet override whose launch template (moto's stored data, `$Latest` / `$Default` / a
        number) targets a seeded reservation (`CapacityReservationSpecification.CapacityReservationTarget`)
        is removed and answered with a `ReservationCapacityExceeded` error when the reservation is full,
        or not for the override's type and zone (`InvalidParameterCombination`); otherwise the instance
        moto launches takes one of its instances (a `capacity-block` or `reserved-capacity` fleet is
        handed to moto as on-demand, the only kinds moto launches). Launches per reservation are in `/stowage/state`
        `reservationLaunches`; a reservation's state is `reservations`.
    POST /stowage/reset     clears every rule and counter (and the seeded prices and reservations; not
                            the SSM parameters).
    GET  /stowage/state     {"iceRules": [...], "throttleRules": [...], "faultRule": {...} or null,
                             "requests": {action: n}, "throttled": {action: n}, "iceErrors": n,
                             "injected": {action: {code: n}}}

Requests in the JSON protocols (SSM, and whatever else sends `X-Amz-Target: Service.Action`) are
counted under their action too (`requests["GetParameter"]`), and throttle rules that name their action
explicitly apply to them (answered with a JSON `ThrottlingException`, HTTP 400, as those services
throttle); rules without an action and random faults stay EC2-only.

It also emulates EC2's `prioritized` and `capacity-optimized-prioritized` allocation strategies, which
moto ignores: the overrides left are ordered by Priority (lowest first) and the launch template config
holding the best one goes first, so moto's "first override wins" picks the override EC2 would.

Everything else passes through untouched. Run: python ice_server.py -H 127.0.0.1 -p PORT
"""

import argparse
import io
import json
import random
import signal
import sys
import threading
import uuid
from urllib.parse import parse_qsl, urlencode
from xml.sax.saxutils import escape

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import run_simple

PRIORITIZED = {"prioritized", "capacity-optimized-prioritized"}


class State:
    def __init__(self):
        self.lock = threading.Lock()
        self.reset()

    def reset(self):
        self.ice_rules = []
        self.throttle_rules = []
        self.requests = {}
        self.throttled = {}
        self.ice_errors = 0
        self.fault_rule = None
        self.fault_rng = None
        self.injected = {}
        self.prices = {}
        self.pricing_regions = []
        self.reservations = {}
        self.reservation_launches = {}

    def snapshot(self):
        return {
            "iceRules": self.ice_rules,
            "throttleRules": self.throttle_rules,
            "faultRule": self.fault_rule,
            "requests": self.requests,
            "throttled": self.throttled,
            "iceErrors": self.ice_errors,
            "injected": self.injected,
            "pricingRegions": self.pricing_regions,
            "reservations": self.reservations,
            "reservationLaunches": self.reservation_launches,
        }

    def admit(self, action, environ, any_action_rules, faults):
        """Counts a request for `action` (the caller holds the lock) and returns the (status, code, message)
        of the error to inject instead of answering it, or None. A throttle rule applies when it names the
        action, or names none and `any_action_rules`; random faults only with `faults`."""
        self.requests[action] = self.requests.get(action, 0) + 1
        for rule in self.throttle_rules:
            if rule["remaining"] > 0 and (rule.get("action") == action or (any_action_rules and rule.get("action") is None)):
                rule["remaining"] -= 1
                self.throttled[action] = self.throttled.get(action, 0) + 1
                return rule["status"], rule["code"], rule["message"]
        if faults:
            fault = self.random_fault(action, environ)
            if fault is not None:
                return fault[1], fault[0], fault[2]
        return None

    def random_fault(self, action, environ):
        """The (code, status, message) of a random fault for this request, or None (lock held)."""
        rule = self.fault_rule
        if rule is None or rule["rate"] <= 0:
            return None
        if rule.get("actions") is not None and action not in rule["actions"]:
            return None
        agent = rule.get("userAgent")
        if agent is not None:
            seen = environ.get("HTTP_USER_AGENT", "") + " " + environ.get("HTTP_X_AMZ_USER_AGENT", "")
            if agent not in seen:
                return None
        if self.fault_rng.random() >= rule["rate"]:
            return None
        err = self.fault_rng.choice(rule["errors"])
        per_action = self.injected.setdefault(action, {})
        per_action[err["code"]] = per_action.get(err["code"], 0) + 1
        return err["code"], err["status"], f"{err['code']} (random fault injected by stowage ice_server)"


def json_response(start_response, status, obj):
    body = json.dumps(obj).encode()
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]


def seed_ssm_parameters(parameters):
    """Writes public parameters into moto's SSM backend (see POST /stowage/ssm); returns how many."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.core.utils import utcnow
    from moto.ssm.models import Parameter, ssm_backends

    backend = ssm_backends[DEFAULT_ACCOUNT_ID]["us-east-1"]
    for name, value in parameters.items():
        versions = backend._parameters[name]
        versions.append(
            Parameter(
                account_id=DEFAULT_ACCOUNT_ID,
                name=name,
                value=value,
                parameter_type="String",
                description=None,
                allowed_pattern=None,
                keyid=None,
                last_modified_date=utcnow(),
                version=len(versions) + 1,
                data_type="aws:ec2:image" if value.startswith("ami-") else "text",
            )
        )
    return len(parameters)


def signing_region(environ, default="us-east-1"):
    """The region of the request's SigV4 credential scope (`default` when it has none)."""
    auth = environ.get("HTTP_AUTHORIZATION", "")
    scope = auth.split("Credential=", 1)[1].split(",", 1)[0].split("/") if "Credential=" in auth else []
    return scope[2] if len(scope) > 2 else default


def lt_reservation(lt_spec, region):
    """The capacity reservation a CreateFleet launch template spec's stored template targets, if any."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.ec2.models import ec2_backends

    backend = ec2_backends[DEFAULT_ACCOUNT_ID][region]
    try:
        name = lt_spec.get("LaunchTemplateSpecification.LaunchTemplateName")
        template = backend.get_launch_template_by_name(name) if name else backend.get_launch_template(lt_spec.get("LaunchTemplateSpecification.LaunchTemplateId"))
        version = lt_spec.get("LaunchTemplateSpecification.Version", "$Latest")
        if version == "$Latest":
            v = template.latest_version()
        elif version == "$Default":
            v = template.default_version()
        else:
            v = template.get_version(int(version))
    except Exception:
        return None  # moto answers the missing template itself
    spec = v.data.get("CapacityReservationSpecification") or {}
    return (spec.get("CapacityReservationTarget") or {}).get("CapacityReservationId")


def reservation_xml(r):
    tags = "".join(f"<item><key>{escape(k)}</key><value>{escape(v)}</value></item>" for k, v in sorted(r["tags"].items()))
    end = f"<endDate>{escape(r['endDate'])}</endDate>" if r.get("endDate") else ""
    return (
        f"<item><capacityReservationId>{escape(r['id'])}</capacityReservationId><ownerId>{escape(r['ownerId'])}</ownerId>"
        f"<instanceType>{escape(r['instanceType'])}</instanceType><availabilityZone>{escape(r['zone'])}</availabilityZone>"
        f"<tenancy>default</tenancy><totalInstanceCount>{r['total']}</totalInstanceCount><availableInstanceCount>{r['available']}</availableInstanceCount>"
        f"<state>{escape(r['state'])}</state>{end}<instanceMatchCriteria>{escape(r['matchCriteria'])}</instanceMatchCriteria>"
        f"<reservationType>{escape(r['type'])}</reservationType><interruptible>{'true' if r['interruptible'] else 'false'}</interruptible>"
        f"<tagSet>{tags}</tagSet></item>"
    )


def reservation_matches(r, ids, filters):
    if ids and r["id"] not in ids:
        return False
    for name, values in filters.items():
        if name == "state":
            got = [r["state"]]
        elif name == "owner-id":
            got = [r["ownerId"]]
        elif name == "instance-match-criteria":
            got = [r["matchCriteria"]]
        elif name == "instance-type":
            got = [r["instanceType"]]
        elif name == "availability-zone":
            got = [r["zone"]]
        elif name == "tag-key":
            got = list(r["tags"])
        elif name.startswith("tag:"):
            got = [r["tags"][name[4:]]] if name[4:] in r["tags"] else []
        else:
            return False  # a filter EC2 has that this emulation does not: match nothing, visibly
        if not any(g in values for g in got):
            return False
    return True


def ec2_error(start_response, status, code, message):
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Response><Errors><Error><Code>{escape(code)}</Code><Message>{escape(message)}</Message></Error></Errors>"
        f"<RequestID>{uuid.uuid4()}</RequestID></Response>"
    ).encode()
    reason = {400: "Bad Request", 429: "Too Many Requests", 500: "Internal Server Error", 503: "Service Unavailable"}
    start_response(
        f"{status} {reason.get(status, 'Error')}",
        [("Content-Type", "text/xml"), ("Content-Length", str(len(body)))],
    )
    return [body]


def json_error(start_response, status, code, message):
    """An error of the AWS JSON protocols (SSM, the Price List API): `__type` and the `X-Amzn-ErrorType` header."""
    out = json.dumps({"__type": code, "message": message}).encode()
    start_response(f"{status} Error", [("Content-Type", "application/x-amz-json-1.1"), ("Content-Length", str(len(out))), ("x-amzn-ErrorType", code)])
    return [out]


def price_item(instance_type, usd, region, tenancy, family):
    """One Price List item (a JSON document in a string), trimmed to the fields AWS sends that matter here."""
    sku = "STOWAGE" + instance_type.replace(".", "").upper()
    return json.dumps({
        "product": {"productFamily": family, "sku": sku, "attributes": {
            "instanceType": instance_type, "regionCode": region, "tenancy": tenancy, "operatingSystem": "Linux",
            "preInstalledSw": "NA", "capacitystatus": "Used", "marketoption": "OnDemand", "servicecode": "AmazonEC2"}},
        "serviceCode": "AmazonEC2",
        "terms": {"OnDemand": {f"{sku}.JRTCKXETXF": {"sku": sku, "offerTermCode": "JRTCKXETXF", "priceDimensions": {
            f"{sku}.JRTCKXETXF.6YS6EN2CT7": {"unit": "Hrs", "pricePerUnit": {"USD": f"{float(usd):.10f}"},
                                             "description": f"${usd} per On Demand Linux {instance_type} Instance Hour"}}}}},
        "version": "stowage-seeded", "publicationDate": "2026-12-01T00:00:00Z",
    })


def subnet_zone(subnet_id):
    """The zone of a subnet in moto's backend (same process), for overrides that name no zone."""
    try:
        from moto.core import DEFAULT_ACCOUNT_ID
        from moto.ec2.models import ec2_backends

        for region, backend in ec2_backends[DEFAULT_ACCOUNT_ID].items():
            try:
                return backend.get_subnet(subnet_id).availability_zone
            except Exception:
                continue
    except Exception:
        pass
    return None


class FleetRequest:
    """A CreateFleet query-protocol request, parsed enough to filter and reorder overrides."""

    def __init__(self, pairs):
        self.other = []
        self.configs = {}  # config index -> {"spec": [(suffix, value)], "overrides": {index: {field: value}}}
        for key, value in pairs:
            parts = key.split(".")
            if parts[0] == "LaunchTemplateConfigs" and len(parts) >= 3:
                cfg = self.configs.setdefault(int(parts[1]), {"spec": [], "overrides": {}})
                if parts[2] == "Overrides" and len(parts) >= 5:
                    ov = cfg["overrides"].setdefault(int(parts[3]), {})
                    ov[".".join(parts[4:])] = value
                else:
                    cfg["spec"].append((".".join(parts[2:]), value))
            else:
                self.other.append((key, value))
        params = dict(self.other)
        self.capacity_type = params.get("TargetCapacitySpecification.DefaultTargetCapacityType", "on-demand")
        strategy_key = "SpotOptions.AllocationStrategy" if self.capacity_type == "spot" else "OnDemandOptions.AllocationStrategy"
        self.strategy = params.get(strategy_key, "")

    def lt_spec(self, cfg):
        return {k: v for k, v in cfg["spec"] if k.startswith("LaunchTemplateSpecification.")}

    def encode(self, configs):
        pairs = list(self.other)
        for i, (cfg, overrides) in enumerate(configs, start=1):
            pairs += [(f"LaunchTemplateConfigs.{i}.{k}", v) for k, v in cfg["spec"]]
            for j, ov in enumerate(overrides, start=1):
                pairs += [(f"LaunchTemplateConfigs.{i}.Overrides.{j}.{k}", v) for k, v in ov.items()]
        return urlencode(pairs).encode()


def matches(rule, instance_type, zone, capacity_type):
    return (
        rule.get("instanceType") in (None, instance_type)
        and rule.get("zone") in (None, zone)
        and rule.get("capacityType") in (None, capacity_type)
    )


def error_item(lt_spec, override, zone, capacity_type, code, message):
    spec_xml = "".join(
        f"<{tag}>{escape(lt_spec[key])}</{tag}>"
        for key, tag in (
            ("LaunchTemplateSpecification.LaunchTemplateId", "launchTemplateId"),
            ("LaunchTemplateSpecification.LaunchTemplateName", "launchTemplateName"),
            ("LaunchTemplateSpecification.Version", "version"),
        )
        if key in lt_spec
    )
    ov_xml = f"<instanceType>{escape(override.get('InstanceType', ''))}</instanceType>"
    if "SubnetId" in override:
        ov_xml += f"<subnetId>{escape(override['SubnetId'])}</subnetId>"
    if zone:
        ov_xml += f"<availabilityZone>{escape(zone)}</availabilityZone>"
    if "Priority" in override:
        ov_xml += f"<priority>{escape(override['Priority'])}</priority>"
    return (
        "<item><launchTemplateAndOverrides>"
        f"<launchTemplateSpecification>{spec_xml}</launchTemplateSpecification><overrides>{ov_xml}</overrides>"
        f"</launchTemplateAndOverrides><lifecycle>{escape(capacity_type)}</lifecycle>"
        f"<errorCode>{escape(code)}</errorCode><errorMessage>{escape(message)}</errorMessage></item>"
    )


class Middleware:
    def __init__(self, app):
        self.app = app
        self.state = State()

    def __call__(self, environ, start_response):
        path = environ.get("PATH_INFO", "")
        if path.startswith("/stowage/"):
            return self.control(path, environ, start_response)
        if environ.get("HTTP_X_AMZ_TARGET") == "AWSPriceListService.GetProducts":
            return self.get_products(environ, start_response)
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        if target:
            action = target.rsplit(".", 1)[-1]
            with self.state.lock:
                # Only rules naming the action: rules without one are for EC2's actions.
                injected = self.state.admit(action, environ, any_action_rules=False, faults=False)
            if injected is not None:
                return json_error(start_response, 400, "ThrottlingException", injected[2])
            return self.app(environ, start_response)
        if environ.get("REQUEST_METHOD") != "POST" or "x-www-form-urlencoded" not in environ.get("CONTENT_TYPE", ""):
            return self.app(environ, start_response)
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        pairs = parse_qsl(body.decode(), keep_blank_values=True)
        action = dict(pairs).get("Action", "")
        with self.state.lock:
            injected = self.state.admit(action, environ, any_action_rules=True, faults=True)
            ice_rules = list(self.state.ice_rules)
        if injected is not None:
            return ec2_error(start_response, *injected)
        if action == "CreateFleet":
            return self.create_fleet(environ, start_response, pairs, ice_rules)
        if action == "DescribeCapacityReservations":
            return self.describe_capacity_reservations(start_response, pairs)
        return self.forward(environ, start_response, body)

    def forward(self, environ, start_response, body):
        environ["wsgi.input"] = io.BytesIO(body)
        environ["CONTENT_LENGTH"] = str(len(body))
        return self.app(environ, start_response)

    def create_fleet(self, environ, start_response, pairs, ice_rules):
        req = FleetRequest(pairs)
        kept, errors = [], []
        region = signing_region(environ)
        reservation_of = {}  # config index -> reservation id its launch template targets
        for ci in sorted(req.configs):
            cfg = req.configs[ci]
            target = lt_reservation(req.lt_spec(cfg), region)
            if target is not None:
                reservation_of[ci] = target
            overrides = []
            for oi in sorted(cfg["overrides"]):
                ov = cfg["overrides"][oi]
                zone = ov.get("AvailabilityZone") or (subnet_zone(ov["SubnetId"]) if "SubnetId" in ov else None)
                rule = next((r for r in ice_rules if matches(r, ov.get("InstanceType"), zone, req.capacity_type)), None)
                with self.state.lock:
                    res = self.state.reservations.get(target) if target is not None else None
                    if target is not None and res is not None and rule is None:
                        if res["instanceType"] != ov.get("InstanceType") or res["zone"] != zone:
                            rule = {"code": "InvalidParameterCombination", "message": f"capacity reservation {target} is for {res['instanceType']} in {res['zone']} (stowage ice_server)"}
                        elif res["available"] <= 0 or res["state"] != "active":
                            rule = {"code": "ReservationCapacityExceeded", "message": f"capacity reservation {target} has no available capacity (stowage ice_server)"}
                if rule is None:
                    overrides.append(ov)
                else:
                    errors.append(error_item(req.lt_spec(cfg), ov, zone, req.capacity_type, rule["code"], rule["message"]))
            if overrides or not cfg["overrides"]:
                kept.append((cfg, overrides))
        if req.strategy in PRIORITIZED:
            prio = lambda ov: float(ov.get("Priority", "inf"))  # noqa: E731
            kept = [(cfg, sorted(ovs, key=prio)) for cfg, ovs in kept]
            kept.sort(key=lambda c: min((prio(o) for o in c[1]), default=float("inf")))
        if errors:
            with self.state.lock:
                self.state.ice_errors += len(errors)
        if reservation_of and req.capacity_type in ("capacity-block", "reserved-capacity"):
            # moto launches only on-demand and spot fleets; EC2 launches these into the reservation the
            # launch template targets, which is what the reservation bookkeeping below emulates.
            key = "TargetCapacitySpecification.DefaultTargetCapacityType"
            req.other = [(k, "on-demand" if k == key else v) for k, v in req.other]
            pairs = [(k, "on-demand" if k == key else v) for k, v in pairs]
        if not errors and req.strategy not in PRIORITIZED and not reservation_of:
            return self.forward(environ, start_response, urlencode(pairs).encode())
        if not kept:
            body = (
                '<?xml version="1.0" encoding="UTF-8"?>\n'
                '<CreateFleetResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">'
                f"<requestId>{uuid.uuid4()}</requestId><fleetId>fleet-{uuid.uuid4()}</fleetId>"
                f"<errorSet>{''.join(errors)}</errorSet><fleetInstanceSet/></CreateFleetResponse>"
            ).encode()
            start_response("200 OK", [("Content-Type", "text/xml"), ("Content-Length", str(len(body)))])
            return [body]
        captured = {}

        def capture(status, headers, exc_info=None):
            captured["status"], captured["headers"] = status, headers
            return lambda data: None

        environ["wsgi.input"] = io.BytesIO(req.encode(kept))
        environ["CONTENT_LENGTH"] = str(len(environ["wsgi.input"].getvalue()))
        chunks = self.app(environ, capture)
        try:
            out = b"".join(chunks)
        finally:
            if hasattr(chunks, "close"):
                chunks.close()
        if captured["status"].startswith("200") and "<instanceIds>" in out.decode():
            # moto gives the capacity to the first override of the first config left.
            first = next(ci for ci, c in req.configs.items() if c is kept[0][0])
            with self.state.lock:
                res = self.state.reservations.get(reservation_of.get(first))
                if res is not None:
                    res["available"] -= 1
                    self.state.reservation_launches[res["id"]] = self.state.reservation_launches.get(res["id"], 0) + 1
        if errors and captured["status"].startswith("200"):
            text = out.decode()
            marker = "</CreateFleetResponse>"
            if marker in text and "<errorSet>" not in text:
                text = text.replace(marker, f"<errorSet>{''.join(errors)}</errorSet>{marker}")
            out = text.encode()
        headers = [(k, v) for k, v in captured["headers"] if k.lower() != "content-length"]
        headers.append(("Content-Length", str(len(out))))
        start_response(captured["status"], headers)
        return [out]

    def describe_capacity_reservations(self, start_response, pairs):
        ids = [v for k, v in pairs if k.startswith("CapacityReservationId.")]
        names, filters = {}, {}
        for k, v in pairs:
            parts = k.split(".")
            if parts[0] == "Filter" and len(parts) == 3 and parts[2] == "Name":
                names[parts[1]] = v
        for k, v in pairs:
            parts = k.split(".")
            if parts[0] == "Filter" and len(parts) == 4 and parts[2] == "Value" and parts[1] in names:
                filters.setdefault(names[parts[1]], []).append(v)
        params = dict(pairs)
        with self.state.lock:
            found = [r for _, r in sorted(self.state.reservations.items()) if reservation_matches(r, ids, filters)]
            start = int(params.get("NextToken") or 0)
            size = int(params.get("MaxResults") or 1000)
            page = found[start:start + size]
            items = "".join(reservation_xml(r) for r in page)
        token = f"<nextToken>{start + size}</nextToken>" if start + size < len(found) else ""
        body = (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            '<DescribeCapacityReservationsResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">'
            f"<requestId>{uuid.uuid4()}</requestId><capacityReservationSet>{items}</capacityReservationSet>{token}"
            "</DescribeCapacityReservationsResponse>"
        ).encode()
        start_response("200 OK", [("Content-Type", "text/xml"), ("Content-Length", str(len(body)))])
        return [body]

    def get_products(self, environ, start_response):
        length = int(environ.get("CONTENT_LENGTH") or 0)
        req = json.loads(environ["wsgi.input"].read(length) or b"{}")
        action = "GetProducts"
        with self.state.lock:
            st = self.state
            st.pricing_regions.append(signing_region(environ, default=""))
            injected = st.admit(action, environ, any_action_rules=True, faults=True)
            if injected is not None:
                return json_error(start_response, *injected)
            filters = {f.get("Field"): f.get("Value") for f in req.get("Filters", [])}
            wanted = {"serviceCode": "AmazonEC2", "preInstalledSw": "NA", "operatingSystem": "Linux", "capacitystatus": "Used", "marketoption": "OnDemand"}
            seeded = st.prices.get(filters.get("regionCode"), {})
            if req.get("ServiceCode") != "AmazonEC2" or any(filters.get(k) != v for k, v in wanted.items()):
                table = {}
            elif (filters.get("tenancy"), filters.get("productFamily")) == ("Shared", "Compute Instance"):
                table = seeded.get("prices", {})
            elif (filters.get("tenancy"), filters.get("productFamily")) == ("Dedicated", "Compute Instance (bare metal)"):
                table = seeded.get("metalPrices", {})
            else:
                table = {}
            items = [price_item(t, p, filters.get("regionCode"), filters.get("tenancy"), filters.get("productFamily")) for t, p in sorted(table.items())]
        start = int(req.get("NextToken") or 0)
        size = int(req.get("MaxResults") or 100)
        page = {"FormatVersion": "aws_v1", "PriceList": items[start:start + size]}
        if start + size < len(items):
            page["NextToken"] = str(start + size)
        out = json.dumps(page).encode()
        start_response("200 OK", [("Content-Type", "application/x-amz-json-1.1"), ("Content-Length", str(len(out)))])
        return [out]

    def control(self, path, environ, start_response):
        length = int(environ.get("CONTENT_LENGTH") or 0)
        raw = environ["wsgi.input"].read(length) if length else b""
        try:
            body = json.loads(raw) if raw.strip() else {}
        except ValueError as e:
            return json_response(start_response, "400 Bad Request", {"error": f"invalid JSON: {e}"})
        st = self.state
        with st.lock:
            if path == "/stowage/ice" and environ["REQUEST_METHOD"] == "POST":
                rule = {k: body[k] for k in ("instanceType", "zone", "capacityType") if body.get(k) is not None}
                rule["code"] = body.get("code") or "InsufficientInstanceCapacity"
                rule["message"] = body.get("message") or "We currently do not have sufficient capacity in the Availability Zone you requested. (injected by stowage ice_server)"
                st.ice_rules.append(rule)
                return json_response(start_response, "200 OK", {"rules": len(st.ice_rules)})
            if path == "/stowage/throttle" and environ["REQUEST_METHOD"] == "POST":
                rule = {
                    "remaining": int(body.get("count", 1)),
                    "code": body.get("code") or "RequestLimitExceeded",
                    "status": int(body.get("status") or 503),
                    "message": body.get("message") or "Request limit exceeded. (injected by stowage ice_server)",
                }
                if body.get("action"):
                    rule["action"] = body["action"]
                st.throttle_rules.append(rule)
                return json_response(start_response, "200 OK", {"rules": len(st.throttle_rules)})
            if path == "/stowage/faults" and environ["REQUEST_METHOD"] == "POST":
                errors = body.get("errors") or [{"code": "RequestLimitExceeded", "status": 503}, {"code": "InternalError", "status": 500}]
                try:
                    rule = {
                        "rate": float(body.get("rate", 0)),
                        "seed": int(body.get("seed", 0)),
                        "actions": body.get("actions"),
                        "userAgent": body.get("userAgent"),
                        "errors": [{"code": str(e["code"]), "status": int(e["status"])} for e in errors],
                    }
                except (KeyError, TypeError, ValueError) as e:
                    return json_response(start_response, "400 Bad Request", {"error": f"invalid fault rule: {e}"})
                if not 0 <= rule["rate"] <= 1:
                    return json_response(start_response, "400 Bad Request", {"error": f"rate {rule['rate']} is not in [0, 1]"})
                st.fault_rule = rule
                st.fault_rng = random.Random(rule["seed"])
                return json_response(start_response, "200 OK", {"faultRule": rule})
            if path == "/stowage/prices" and environ["REQUEST_METHOD"] == "POST":
                if not isinstance(body.get("region"), str):
                    return json_response(start_response, "400 Bad Request", {"error": "region is required"})
                st.prices[body["region"]] = {"prices": body.get("prices") or {}, "metalPrices": body.get("metalPrices") or {}}
                return json_response(start_response, "200 OK", {"regions": sorted(st.prices)})
            if path == "/stowage/ssm" and environ["REQUEST_METHOD"] == "POST":
                params = body.get("parameters")
                if not isinstance(params, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in params.items()):
                    return json_response(start_response, "400 Bad Request", {"error": "parameters must be an object of name -> string value"})
                return json_response(start_response, "200 OK", {"written": seed_ssm_parameters(params)})
            if path == "/stowage/capacity-reservations" and environ["REQUEST_METHOD"] == "POST":
                try:
                    for r in body.get("reservations") or []:
                        count = int(r["count"])
                        st.reservations[str(r["id"])] = {
                            "id": str(r["id"]),
                            "instanceType": str(r["instanceType"]),
                            "zone": str(r["zone"]),
                            "total": count,
                            "available": count,
                            "ownerId": str(r.get("ownerId") or "123456789012"),
                            "tags": {str(k): str(v) for k, v in (r.get("tags") or {}).items()},
                            "matchCriteria": str(r.get("matchCriteria") or "targeted"),
                            "type": str(r.get("type") or "default"),
                            "interruptible": bool(r.get("interruptible", False)),
                            "state": str(r.get("state") or "active"),
                            "endDate": r.get("endDate"),
                        }
                except (KeyError, TypeError, ValueError) as e:
                    return json_response(start_response, "400 Bad Request", {"error": f"invalid reservation: {e}"})
                return json_response(start_response, "200 OK", {"reservations": sorted(st.reservations)})
            if path == "/stowage/reset" and environ["REQUEST_METHOD"] == "POST":
                st.reset()
                return json_response(start_response, "200 OK", {})
            if path == "/stowage/state":
                return json_response(start_response, "200 OK", st.snapshot())
        return json_response(start_response, "404 Not Found", {"error": f"unknown {environ['REQUEST_METHOD']} {path}"})


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-H", "--host", default="127.0.0.1")
    parser.add_argument("-p", "--port", type=int, required=True)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    app = DomainDispatcherApplication(create_backend_app)
    app.debug = True
    run_simple(args.host, args.port, Middleware(app), threaded=True, request_handler=MotoRequestHandler)


if __name__ == "__main__":
    main()
