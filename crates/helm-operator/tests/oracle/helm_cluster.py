"""Helm's own library (helm-python-sdk, Helm v4) against a cluster, for bosun's tests.

usage: helm_cluster.py KUBECONFIG NAMESPACE COMMAND JSON_ARGS
commands: install {chart, name, values}, status {name}, history {name}, list {},
          get_values {name}
Every command takes an optional "driver" (Helm's storage driver: secret, the default, or
configmap). Prints the library's answer as JSON.
"""
import json
import sys

from helm_python import Config


def main() -> None:
    kubeconfig, namespace, command, raw = sys.argv[1:5]
    args = json.loads(raw)
    driver = args.get("driver")
    with Config(kubeconfig_path=kubeconfig, namespace=namespace, storage_driver=driver) as cfg:
        if command == "install":
            out = cfg.install(args["chart"], args["name"], args.get("values") or {})
        elif command == "status":
            out = cfg.status(args["name"])
        elif command == "history":
            out = cfg.history(args["name"])
        elif command == "list":
            out = cfg.list(all_states=True)
        elif command == "get_values":
            out = cfg.get_values(args["name"])
        else:
            raise SystemExit(f"unknown command {command}")
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
