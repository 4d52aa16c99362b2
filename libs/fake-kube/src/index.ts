/**
 * An in-repo fake of the Kubernetes API server for tests (no cluster can run on these machines).
 */
export {};
