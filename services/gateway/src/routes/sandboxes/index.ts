/**
 * The sandboxes API (`/api/v2/sandboxes…`): templates and snapshots, registries, volumes, warm
 * pools and sandboxes (the control plane), and each sandbox's data plane (commands and files),
 * translated to the sandbox-manager's gRPC services. Point the `langsmith/sandbox` client at
 * `<gateway>/api/v2/sandboxes` with a Berth API key and it works unchanged. Every call carries the
 * caller's tenant; another tenant's objects are 404s. Without a sandbox-manager (or one that
 * cannot run sandboxes here) every route answers 503 with Retry-After and what to do about it.
 */
import type { SandboxManagerClients } from '../../sandbox-manager.js';
import { boxRoutes } from './boxes.js';
import { catalogRoutes } from './catalog.js';
import { dataPlaneRoutes } from './dataplane.js';
import { templateRoutes } from './templates.js';
import type { GatewayApi } from '../../access.js';

export { ExecSockets } from './exec-socket.js';

export interface SandboxRouteDeps {
  manager: SandboxManagerClients;
  /** See GatewayConfig.publicUrl: the origin of every `dataplane_url`. */
  publicUrl?: string;
}

export function sandboxRoutes(api: GatewayApi, deps: SandboxRouteDeps): void {
  templateRoutes(api, deps);
  catalogRoutes(api, deps);
  boxRoutes(api, deps);
  dataPlaneRoutes(api, deps);
}
