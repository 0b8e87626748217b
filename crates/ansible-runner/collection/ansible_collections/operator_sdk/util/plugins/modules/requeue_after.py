#!/usr/bin/python
# bosun's stand-in for operator_sdk.util.requeue_after: reports `period`; the operator reads
# it from the run's events and runs the CR again after it.
from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec=dict(time=dict(type="str", required=True)),
                           supports_check_mode=True)
    module.exit_json(changed=False, period=module.params["time"])


if __name__ == "__main__":
    main()
