#!/usr/bin/python
# Stand-in for operator_sdk.util.k8s_status used by bosun's differential tests: merges
# `status` keys and `conditions` (by type, replacing one only when a field other than
# lastTransitionTime changed) into an object's status with a merge-patch on /status, and
# writes nothing when nothing changes.
from datetime import datetime, timezone

from ansible.module_utils.basic import AnsibleModule


def merge_conditions(current, new):
    out = [dict(c) for c in current]
    for c in new:
        slot = next((x for x in out if x.get("type") == c.get("type")), None)
        if slot is None:
            out.append(c)
            continue
        strip = lambda d: {k: v for k, v in d.items() if k != "lastTransitionTime"}
        if strip(slot) != strip(c):
            c = dict(c)
            if slot.get("status") == c.get("status"):
                c["lastTransitionTime"] = slot.get("lastTransitionTime")
            out[out.index(slot)] = c
    return out


def norm(c, now):
    c = dict(c)
    s = c.get("status")
    if isinstance(s, bool):
        c["status"] = "True" if s else "False"
    c.setdefault("lastTransitionTime", now)
    return c


def main():
    module = AnsibleModule(argument_spec=dict(
        api_version=dict(type="str", default="v1", aliases=["api", "version"]),
        kind=dict(type="str", required=True),
        name=dict(type="str", required=True),
        namespace=dict(type="str"),
        status=dict(type="dict", default={}),
        conditions=dict(type="list", elements="dict", default=[]),
        replace=dict(type="bool", default=False, aliases=["force"]),
        replace_lists=dict(type="bool", default=False),
    ))
    from kubernetes import config, dynamic
    from kubernetes.client import api_client
    client = dynamic.DynamicClient(api_client.ApiClient(configuration=config.load_kube_config()))
    p = module.params
    res = client.resources.get(api_version=p["api_version"], kind=p["kind"])
    obj = res.get(name=p["name"], namespace=p["namespace"]).to_dict()
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    before = obj.get("status") or {}
    status = dict(p["status"])
    conds = [norm(c, now) for c in p["conditions"]] + [norm(c, now) for c in status.pop("conditions", [])]
    after = {} if p["replace"] else dict(before)
    after.update(status)
    if conds:
        after["conditions"] = merge_conditions(after.get("conditions", []), conds)
    if after == before:
        module.exit_json(changed=False, result=obj)
    r = res.status.patch(body={"status": after}, name=p["name"], namespace=p["namespace"],
                         content_type="application/merge-patch+json")
    module.exit_json(changed=True, result=r.to_dict())


if __name__ == "__main__":
    main()
