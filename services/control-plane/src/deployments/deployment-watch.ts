/**
 * Watching a deployment: a client (the console's deployment page) is told when anything it shows
 * changes — a revision made or moved on, the serving revision or its health, secrets, the
 * deployment deleted — and reads the deployment again then, instead of polling it. Woken by the
 * store's NOTIFY on DEPLOYMENT_CHANGES_CHANNEL, through the control plane's NotificationHub.
 */
import { NotFoundError } from '@berth/errors';
import type { NotificationHub } from './notification-hub.js';
import { DEPLOYMENT_CHANGES_CHANNEL } from './notifications.js';
import type { DeploymentStore } from './store.js';

export class DeploymentWatch {
  constructor(
    private readonly store: DeploymentStore,
    private readonly hub: NotificationHub,
  ) {}

  /**
   * Yields at once (read the deployment now), then after each change (changes close together may
   * come as one), until the deployment is deleted (a last `deleted`) or `signal` aborts.
   * @throws NotFoundError for a deployment that is not the tenant's
   * @throws ResourceExhaustedError when the tenant holds as many streams as it may (NotificationHub)
   */
  async *watch(tenantId: string, deploymentId: string, signal: AbortSignal): AsyncGenerator<{ deleted: boolean }> {
    // As stored (lower case): notifications name it so.
    const { id } = await this.store.get(tenantId, deploymentId);
    const subscription = await this.hub.subscribe(tenantId, DEPLOYMENT_CHANGES_CHANNEL, id);
    try {
      while (!signal.aborted) {
        subscription.reset();
        if (!(await this.exists(tenantId, id))) {
          yield { deleted: true };
          return;
        }
        yield { deleted: false };
        await subscription.wait(signal);
      }
    } finally {
      subscription.close();
    }
  }

  private async exists(tenantId: string, deploymentId: string): Promise<boolean> {
    try {
      await this.store.get(tenantId, deploymentId);
      return true;
    } catch (error) {
      if (error instanceof NotFoundError) return false;
      throw error;
    }
  }
}
