/**
 * What `berth serve --service` may run: the whole platform (`all`, the embedded default) or one of
 * its services (one Deployment each on Kubernetes). Its own file so the command line can list them
 * without loading any service.
 */
export const SERVICE_TARGETS = ['all', 'gateway', 'control-plane', 'sandbox-manager', 'export-worker'] as const;
export type ServiceTarget = (typeof SERVICE_TARGETS)[number];
