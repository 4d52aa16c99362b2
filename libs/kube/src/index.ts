/**
 * The Kubernetes plumbing that the control plane's deployer and the sandbox-manager's driver share
 * (one library, not two copies). Filled in by the sandboxes issue.
 */
export {};
