//! The project's top-level files: Dockerfile (FROM bosun's image), Makefile (operator-sdk's
//! target names and variables; recipes call `bosun` and `kubectl`, and download nothing),
//! `.gitignore`. As operator-sdk's, `install`, `deploy` and `bundle` use config/ as it is:
//! only `make manifests` derives config/crd and config/rbac again, so hand edits survive.
use crate::Plugin;

/// bosun's image at the version of the running binary, tagged as the release workflow pushes
/// it: the git tag `v<version>` (`.github/workflows/ci.yml`).
pub fn image() -> String {
    format!("ghcr.io/bosun-dev/bosun:v{}", env!("CARGO_PKG_VERSION"))
}

/// Where the watches file and charts sit in the operator's image.
pub const HOME: &str = "/opt/bosun";

pub fn dockerfile(plugin: Plugin) -> String {
    let copies = match plugin {
        Plugin::Helm => "COPY watches.yaml ${HOME}/watches.yaml\nCOPY helm-charts  ${HOME}/helm-charts\n",
        // bosun's engine runs the roles natively: no ansible-galaxy step (requirements.yml
        // names the collections for the `--ansible-engine ansible` fallback).
        Plugin::Ansible => "COPY requirements.yml ${HOME}/requirements.yml\nCOPY watches.yaml ${HOME}/watches.yaml\nCOPY roles/ ${HOME}/roles/\nCOPY playbooks/ ${HOME}/playbooks/\n",
        // A Rust project builds its own binary: its files are `rust::init`'s.
        Plugin::Rust => "",
    };
    format!(
        "# The operator: bosun's image with this project's watches file and {what}.\nFROM {image}\n\nENV HOME={HOME}\n{copies}WORKDIR ${{HOME}}\n",
        what = match plugin {
            Plugin::Helm => "charts",
            Plugin::Ansible => "roles and playbooks",
            Plugin::Rust => "code",
        },
        image = image()
    )
}

pub fn gitignore() -> &'static str {
    "\n# Binaries for programs and plugins\n*.exe\n*.exe~\n*.dll\n*.so\n*.dylib\nbin\n\n# editor and IDE paraphernalia\n.idea\n*.swp\n*.swo\n*~\n"
}

pub fn makefile(plugin: Plugin, project: &str, domain: &str) -> String {
    let head = format!(
        "# VERSION defines the project version for the bundle.\nVERSION ?= 0.0.1\n\n# IMAGE_TAG_BASE defines the registry namespace and part of the image name for remote images.\nIMAGE_TAG_BASE ?= {domain}/{project}\n\n# Image URL to use all building/pushing image targets\nIMG ?= controller:latest\n\n# bosun runs the operator, and kubectl's built-in kustomize builds config/: nothing is downloaded.\nBOSUN ?= bosun\nKUBECTL ?= kubectl\nCONTAINER_TOOL ?= docker\n"
    );
    let body = r#"
.PHONY: all
all: docker-build

##@ General

.PHONY: help
help: ## Display this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-15s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Build

.PHONY: run
run: helm-operator ## Run against the configured Kubernetes cluster in ~/.kube/config
	$(BOSUN) run --watches watches.yaml

.PHONY: manifests
manifests: helm-operator ## Generate the CRDs (config/crd/bases) and the operator's RBAC (config/rbac) from watches.yaml and what its charts or roles do.
	$(BOSUN) generate manifests

.PHONY: docker-build
docker-build: ## Build docker image with the manager.
	$(CONTAINER_TOOL) build -t ${IMG} .

.PHONY: docker-push
docker-push: ## Push docker image with the manager.
	$(CONTAINER_TOOL) push ${IMG}

PLATFORMS ?= linux/arm64,linux/amd64
.PHONY: docker-buildx
docker-buildx: ## Build and push docker image for the manager for cross-platform support
	- $(CONTAINER_TOOL) buildx create --name project-v3-builder
	$(CONTAINER_TOOL) buildx use project-v3-builder
	- $(CONTAINER_TOOL) buildx build --push --platform=$(PLATFORMS) --tag ${IMG} -f Dockerfile .
	- $(CONTAINER_TOOL) buildx rm project-v3-builder

##@ Deployment

ifndef ignore-not-found
  ignore-not-found = false
endif

.PHONY: install
install: kustomize ## Install CRDs into the K8s cluster specified in ~/.kube/config.
	$(KUBECTL) kustomize config/crd | $(KUBECTL) apply -f -

.PHONY: uninstall
uninstall: kustomize ## Uninstall CRDs from the K8s cluster specified in ~/.kube/config. Call with ignore-not-found=true to ignore resource not found errors during deletion.
	$(KUBECTL) kustomize config/crd | $(KUBECTL) delete --ignore-not-found=$(ignore-not-found) -f -

.PHONY: deploy
deploy: kustomize ## Deploy controller to the K8s cluster specified in ~/.kube/config.
	$(KUBECTL) kustomize config/default | sed 's|image: controller:latest|image: ${IMG}|' | $(KUBECTL) apply -f -

.PHONY: undeploy
undeploy: ## Undeploy controller from the K8s cluster specified in ~/.kube/config. Call with ignore-not-found=true to ignore resource not found errors during deletion.
	$(KUBECTL) kustomize config/default | $(KUBECTL) delete --ignore-not-found=$(ignore-not-found) -f -

##@ Bundle

# CHANNELS and DEFAULT_CHANNEL define the bundle's channels (e.g. CHANNELS=candidate,fast,stable).
ifneq ($(origin CHANNELS), undefined)
BUNDLE_CHANNELS := --channels=$(CHANNELS)
endif
ifneq ($(origin DEFAULT_CHANNEL), undefined)
BUNDLE_DEFAULT_CHANNEL := --default-channel=$(DEFAULT_CHANNEL)
endif
BUNDLE_METADATA_OPTS ?= $(BUNDLE_CHANNELS) $(BUNDLE_DEFAULT_CHANNEL)

# BUNDLE_IMG defines the image:tag used for the bundle.
BUNDLE_IMG ?= $(IMAGE_TAG_BASE)-bundle:v$(VERSION)

.PHONY: bundle
bundle: helm-operator ## Generate the bundle (bundle/, bundle.Dockerfile) from watches.yaml and config/manifests/bases, then validate it.
	$(BOSUN) bundle --watches watches.yaml --version $(VERSION) --image $(IMG) $(BUNDLE_METADATA_OPTS)
	$(BOSUN) bundle validate ./bundle

.PHONY: bundle-build
bundle-build: ## Build the bundle image.
	$(CONTAINER_TOOL) build -f bundle.Dockerfile -t $(BUNDLE_IMG) .

.PHONY: bundle-push
bundle-push: ## Push the bundle image.
	$(CONTAINER_TOOL) push $(BUNDLE_IMG)

.PHONY: kustomize
kustomize: ## Check that kubectl (its built-in kustomize builds config/) is installed.
	@command -v $(KUBECTL) >/dev/null || { echo "kubectl not found: install it or set KUBECTL"; exit 1; }

.PHONY: helm-operator
helm-operator: ## Check that bosun (it runs the charts of watches.yaml) is installed.
	@command -v $(BOSUN) >/dev/null || { echo "bosun not found: install it or set BOSUN=/path/to/bosun"; exit 1; }
"#;
    // operator-sdk's name for the target that provides the runner.
    let runner = match plugin {
        Plugin::Helm => "helm-operator",
        Plugin::Ansible => "ansible-operator",
        // A Rust project's Makefile is `rust::init`'s; this one is never written for it.
        Plugin::Rust => "operator",
    };
    format!("{head}{}", body.replace("helm-operator", runner))
}

#[cfg(test)]
mod release_tests {
    /// The scaffold's FROM is the reference the release workflow pushes for this version: the
    /// workflow runs on tags `v*` and pushes `$IMAGE:<the tag>`, so the tag keeps its `v`.
    /// (The owner, `github.repository_owner`, is bosun-dev's by convention: not checkable here.)
    #[test]
    fn the_dockerfile_base_is_the_tag_the_release_workflow_pushes() {
        let ci = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.github/workflows/ci.yml"),
        )
        .expect("the release workflow");
        let line = |prefix: &str| {
            ci.lines()
                .map(str::trim)
                .find_map(|l| l.strip_prefix(prefix))
                .unwrap_or_else(|| panic!("ci.yml has no {prefix:?} line"))
                .trim()
                .to_string()
        };
        assert_eq!(line("tags: [\""), "v*\"]", "releases are v-tags");
        assert_eq!(line("tags: ${{ env.IMAGE }}:"), "${{ github.ref_name }}");
        let image = line("IMAGE:").replace("${{ github.repository_owner }}", "bosun-dev");
        let pushed = format!("{image}:v{}", env!("CARGO_PKG_VERSION"));
        assert_eq!(super::image(), pushed);
        assert!(super::dockerfile(crate::Plugin::Helm).contains(&format!("FROM {pushed}\n")));
    }
}
