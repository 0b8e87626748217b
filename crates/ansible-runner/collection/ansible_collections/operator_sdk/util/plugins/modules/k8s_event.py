#!/usr/bin/python
# bosun's stand-in for operator_sdk.util.k8s_event: creates a core/v1 Event (or bumps the
# count of the one with that name).
from datetime import datetime, timezone

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", default="present", choices=["present", "absent"]),
            name=dict(type="str", required=True),
            namespace=dict(type="str", required=True),
            message=dict(type="str"),
            reason=dict(type="str"),
            type=dict(type="str", default="Normal"),
            reportingComponent=dict(type="str"),
            source=dict(type="dict", default={}),
            involvedObject=dict(type="dict", default={}),
            appendTimestamp=dict(type="bool", default=False),
        ),
    )
    from kubernetes import client, config
    from kubernetes.client.rest import ApiException

    p = module.params
    api = client.CoreV1Api(client.ApiClient(configuration=config.load_kube_config()))
    now = datetime.now(timezone.utc)
    name = p["name"] + ("." + now.strftime("%Y%m%d%H%M%S%f") if p["appendTimestamp"] else "")
    try:
        old = api.read_namespaced_event(name, p["namespace"])
    except ApiException as e:
        if e.status != 404:
            raise
        old = None
    if p["state"] == "absent":
        if old is not None:
            api.delete_namespaced_event(name, p["namespace"])
        module.exit_json(changed=old is not None)
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    if old is not None:
        r = api.patch_namespaced_event(name, p["namespace"],
                                       {"count": (old.count or 1) + 1, "lastTimestamp": stamp,
                                        "message": p["message"]})
        module.exit_json(changed=True, result=r.to_dict())
    # apiVersion and kind in the body: ansible-operator's proxy decodes every object it is
    # asked to create (to add the owner reference) and refuses one without them.
    body = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": p["namespace"]},
        "message": p["message"],
        "reason": p["reason"],
        "type": p["type"],
        "count": 1,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "involvedObject": p["involvedObject"],
    }
    # Only what the task gives: operator_sdk.util sets no source or reporting component.
    if p["source"]:
        body["source"] = p["source"]
    if p["reportingComponent"]:
        body["reportingComponent"] = p["reportingComponent"]
    r = api.create_namespaced_event(p["namespace"], body)
    module.exit_json(changed=True, result=r.to_dict())


if __name__ == "__main__":
    main()
