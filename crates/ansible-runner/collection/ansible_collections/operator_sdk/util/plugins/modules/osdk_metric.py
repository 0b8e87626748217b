#!/usr/bin/python
# bosun's stand-in for operator_sdk.util.osdk_metric: accepts the documented arguments so
# roles that report metrics run under bosun's fallback, and warns that the metric is not
# exported (ansible-operator serves these on its own metrics endpoint; bosun's fallback does
# not yet).
from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type="str", required=True),
            description=dict(type="str", required=True),
            metric_type=dict(type="str"),
            counter=dict(type="dict"),
            gauge=dict(type="dict"),
            histogram=dict(type="dict"),
            summary=dict(type="dict"),
        ),
        supports_check_mode=True,
    )
    module.warn("osdk_metric %s: not exported by bosun's real-Ansible fallback" % module.params["name"])
    module.exit_json(changed=False)


if __name__ == "__main__":
    main()
