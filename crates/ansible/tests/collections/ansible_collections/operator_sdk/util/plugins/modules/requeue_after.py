#!/usr/bin/python
# Stand-in for operator_sdk.util.requeue_after used by bosun's differential tests.
from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec=dict(time=dict(type="str", required=True)))
    module.exit_json(changed=False, period=module.params["time"])


if __name__ == "__main__":
    main()
