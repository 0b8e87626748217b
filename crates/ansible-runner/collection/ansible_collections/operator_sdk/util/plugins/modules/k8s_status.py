#!/usr/bin/python
# bosun's stand-in for operator_sdk.util.k8s_status: merges `status` keys and `conditions`
# (by type; a condition is replaced only when a field other than lastTransitionTime changed)
# into an object's status with a merge patch on its status subresource; `replace` puts the
# whole status. Nothing is written when nothing changes.
from datetime import datetime, timezone

from ansible.module_utils.basic import AnsibleModule

VALID = ("True", "False", "Unknown")


def as_condition(c, now, module):
    c = dict(c)
    s = c.get("status")
    if isinstance(s, bool):
        c["status"] = "True" if s else "False"
    elif s not in VALID:
        module.fail_json(msg="condition %r: status must be True, False or Unknown" % c.get("type"))
    c.setdefault("lastTransitionTime", now)
    return c


def merged(current, new):
    out = [dict(c) for c in current]
    for c in new:
        at = next((i for i, x in enumerate(out) if x.get("type") == c.get("type")), None)
        if at is None:
            out.append(c)
            continue
        old = out[at]
        same = {k: v for k, v in old.items() if k != "lastTransitionTime"} == \
            {k: v for k, v in c.items() if k != "lastTransitionTime"}
        if not same:
            if old.get("status") == c.get("status") and old.get("lastTransitionTime"):
                c = dict(c, lastTransitionTime=old["lastTransitionTime"])
            out[at] = c
    return out


def main():
    module = AnsibleModule(
        argument_spec=dict(
            api_version=dict(type="str", default="v1", aliases=["api", "version"]),
            kind=dict(type="str", required=True),
            name=dict(type="str", required=True),
            namespace=dict(type="str"),
            status=dict(type="dict", default={}),
            conditions=dict(type="list", elements="dict", default=[]),
            replace=dict(type="bool", default=False, aliases=["force"]),
            replace_lists=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    from kubernetes import config, dynamic
    from kubernetes.client import api_client

    p = module.params
    client = dynamic.DynamicClient(api_client.ApiClient(configuration=config.load_kube_config()))
    res = client.resources.get(api_version=p["api_version"], kind=p["kind"])
    obj = res.get(name=p["name"], namespace=p["namespace"]).to_dict()
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    before = obj.get("status") or {}
    status = dict(p["status"])
    conds = [as_condition(c, now, module) for c in p["conditions"] + status.pop("conditions", [])]
    after = {} if p["replace"] else dict(before)
    after.update(status)
    if conds:
        after["conditions"] = merged([] if p["replace"] else before.get("conditions", []), conds)
    if after == before:
        module.exit_json(changed=False, result=obj)
    if module.check_mode:
        module.exit_json(changed=True, result=obj)
    if p["replace"]:
        obj["status"] = after
        r = res.status.replace(body=obj, name=p["name"], namespace=p["namespace"])
    else:
        r = res.status.patch(body={"status": after}, name=p["name"], namespace=p["namespace"],
                             content_type="application/merge-patch+json")
    module.exit_json(changed=True, result=r.to_dict())


if __name__ == "__main__":
    main()
