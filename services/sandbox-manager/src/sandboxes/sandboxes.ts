/**
 * Sandboxes: created from a template or snapshot (served from its warm pool when one is ready and
 * the request changes nothing the pool's members were made with, else started cold), stopped,
 * started again with their files and TTLs, deleted. Creation runs in the background; a caller that
 * asked to wait for readiness awaits the same work. Data-plane calls go through `ensureReady`, which
 * resumes a stopped sandbox.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { systemClock, type Clock, type Timer } from '@berth/clock';
import type { Kysely, Transaction } from '@berth/db';
import { ConflictError, DeadlineExceededError, RequestValidationError, type ValidationIssue } from '@berth/errors';
import type { Logger } from '@berth/log';
import type { ProxyConfig } from '@berth/proto';
import type { SecretBox } from '@berth/secret-box';
import { storeProxyConfig } from '../catalog/proxy-config.js';
import { resourcesOf, type TemplateRow, type Templates } from '../catalog/templates.js';
import type { InstanceSpec, Resources, SandboxDriver } from '../drivers/driver.js';
import type { RunConfigJson, SandboxTables } from '../tables.js';
import type { EngineMonitor } from './engine-monitor.js';
import { effectiveResources, INSTANCE_LABELS, instanceSpec, newInstanceName, overrideResources, rowOverrides, type InstanceSpecDeps } from './instance-spec.js';
import { BOX_FIELDS, resourceIssues, templateFields, withDefaults, type ResourceFields, type ResourceKey } from './limits.js';
import type { TenantQuotas } from './quota.js';
import { SandboxStore, type SandboxRef, type SandboxRow } from './store.js';

/** A ready sandbox is not startable; a provisioning one is not stoppable: 409, with the status. */
export class SandboxStateError extends ConflictError {}

export interface SandboxDefaults {
  /** @default 600 */
  idleTtlSeconds: number;
  /** @default 1_209_600 (14 days) */
  deleteAfterStopSeconds: number;
}

export interface CreateSandboxInput {
  name?: string;
  source: { snapshotId: string } | { snapshotName: string } | { templateName: string } | { default: true };
  vcpus?: number;
  memBytes?: number;
  fsCapacityBytes?: number;
  idleTtlSeconds?: number;
  deleteAfterStopSeconds?: number;
  ttlSeconds?: number;
  labels: Record<string, string>;
  proxyConfig?: ProxyConfig;
  runConfig?: RunConfigJson;
}

/** Warm pools as sandboxes use them (see Pools.take and Pools.confirm). */
export interface PoolClaims {
  take(trx: Transaction<SandboxTables>, template: TemplateRow): Promise<{ instance: string; poolName: string } | undefined>;
  confirm(instance: string, sandboxId: string): Promise<boolean>;
}

export interface SandboxesDeps extends InstanceSpecDeps {
  db: Kysely<SandboxTables>;
  box: SecretBox;
  driver: SandboxDriver;
  logger: Logger;
  defaults: SandboxDefaults;
  pools: PoolClaims;
  quotas: TenantQuotas;
  engine: EngineMonitor;
  /** Image of sandboxes created without a snapshot or template (a per-tenant snapshot named "default"). */
  defaultImage?: string;
  /** Called when a sandbox stops or goes: its running commands end. */
  onGone: (sandboxId: string) => void;
  /** @default systemClock */
  clock?: Clock;
}

const TTL_STEP = 60;

function ttlIssues(input: CreateSandboxInput | { idleTtlSeconds?: number; deleteAfterStopSeconds?: number; ttlSeconds?: number }): ValidationIssue[] {
  const issues: ValidationIssue[] = [];
  for (const [key, value] of [
    ['idle_ttl_seconds', input.idleTtlSeconds],
    ['delete_after_stop_seconds', input.deleteAfterStopSeconds],
    ['ttl_seconds', (input as CreateSandboxInput).ttlSeconds],
  ] as const) {
    if (value === undefined) continue;
    if (!Number.isInteger(value) || value < 0 || value % TTL_STEP !== 0)
      issues.push({ loc: ['body', key], msg: `${key} must be 0 (never) or a positive multiple of ${TTL_STEP}`, type: 'value_error' });
  }
  return issues;
}

export class Sandboxes {
  readonly store: SandboxStore;
  /** The manager's time: activity, stops, deletions and TTLs are stamped and judged by it. */
  readonly #clock: Clock;
  /** Creations and starts in flight, by sandbox id. */
  readonly #work = new Map<string, Promise<void>>();
  /** Sandboxes whose stop is under way: their instance is down before their row says stopped. */
  readonly #stopping = new Set<string>();

  constructor(private readonly deps: SandboxesDeps) {
    this.store = new SandboxStore(deps.db);
    this.#clock = deps.clock ?? systemClock;
  }

  /** The clock's time, as a timestamp to record. */
  now(): Date {
    return new Date(this.#clock.now());
  }

  /**
   * Refuses a call (503) while sandboxes cannot run: off on this platform, or the engine down.
   * `fresh`: asks the engine first (calls that change sandboxes); otherwise its last check answers.
   */
  async assertAvailable(fresh = true): Promise<void> {
    await this.deps.engine.assertUp(fresh);
  }

  async create(tenantId: string, input: CreateSandboxInput): Promise<SandboxRow> {
    await this.assertAvailable();
    const issues = ttlIssues(input);
    if (issues.length) throw new RequestValidationError(issues);
    const template = await this.resolveTemplate(tenantId, input.source);
    if (template.status === 'failed') {
      throw new RequestValidationError([{ loc: sourceLoc(input.source), msg: `its image cannot be used: ${template.status_message}`, type: 'value_error' }]);
    }
    const resources = this.resourcesOf(template, input);
    const proxy = input.proxyConfig ? storeProxyConfig(input.proxyConfig, this.deps.box, ['body', 'proxy_config']) : null;
    // Pool members were made from the template alone: a request that changes their resources or
    // egress gets a cold start rather than a member that does not match it.
    const poolable = input.vcpus === undefined && input.memBytes === undefined && input.fsCapacityBytes === undefined && !proxy && template.status === 'ready';
    const now = this.now();
    const id = randomUUID();
    const values = {
      id,
      tenant_id: tenantId,
      name: input.name ?? `sandbox-${randomBytes(4).toString('hex')}`,
      template_id: template.id,
      template_version: template.version,
      status: 'provisioning' as const,
      // What it runs with, defaults included: its quota is counted with these, whatever its template becomes.
      vcpus: resources.cpuMillis / 1000,
      mem_bytes: resources.memoryBytes,
      fs_capacity_bytes: resources.storageBytes,
      idle_ttl_seconds: input.idleTtlSeconds ?? this.deps.defaults.idleTtlSeconds,
      delete_after_stop_seconds: input.deleteAfterStopSeconds ?? this.deps.defaults.deleteAfterStopSeconds,
      ttl_seconds: input.ttlSeconds ?? 0,
      expires_at: input.ttlSeconds ? new Date(now.getTime() + input.ttlSeconds * 1000) : null,
      labels: JSON.stringify(input.labels),
      proxy_config: proxy ? JSON.stringify(proxy) : null,
      run_config: JSON.stringify(input.runConfig ?? null),
      last_activity_at: now,
      created_at: now,
      updated_at: now,
    };
    const { row, member } = await this.deps.quotas.locked(tenantId, async (trx) => {
      const member = poolable ? await this.deps.pools.take(trx, template) : undefined;
      // A warm member becoming this sandbox adds nothing: the quota counted it already.
      if (!member) await this.deps.quotas.check(trx, tenantId, { sandboxes: 1, memoryBytes: resources.memoryBytes, cpuMillis: resources.cpuMillis });
      const row = await new SandboxStore(trx).insert({ ...values, instance: member?.instance ?? newInstanceName(), pool_name: member?.poolName ?? null });
      return { row, member };
    });
    if (member) {
      if (await this.deps.pools.confirm(member.instance, id)) {
        this.deps.logger.info({ sandbox: id, instance: member.instance, pool: member.poolName }, 'sandbox served from a warm pool');
        return this.store.move(id, 'ready');
      }
      // Dead or taken: started cold instead (it is counted already).
      const cold = await this.store.reassign(id, newInstanceName());
      this.track(id, this.provision(cold, 'create'));
      return cold;
    }
    this.track(id, this.provision(row, 'create'));
    return row;
  }

  /**
   * Every limit of a new sandbox: the request's, else its template's, else the operator's
   * defaults. Beyond a maximum is a 422 on the request's field, or on the template that asks for it.
   */
  private resourcesOf(template: TemplateRow, input: CreateSandboxInput): Required<Resources> {
    const { limits } = this.deps;
    const asked = overrideResources({ vcpus: input.vcpus ?? null, memBytes: input.memBytes ?? null, fsCapacityBytes: input.fsCapacityBytes ?? null });
    const source = sourceLoc(input.source);
    const what = `${template.kind} "${template.name}"`;
    let inherited: Resources;
    try {
      inherited = resourcesOf(template.resources);
    } catch (error) {
      throw new RequestValidationError(
        [{ loc: source, msg: `the resources of ${what} cannot be used (${(error as Error).message}): change them`, type: 'value_error' }],
        { cause: error },
      );
    }
    for (const key of Object.keys(asked) as ResourceKey[]) delete inherited[key];
    const names = templateFields(template.kind);
    const fromTemplate = Object.fromEntries(
      (Object.keys(names) as ResourceKey[]).map((key) => [key, { loc: source, name: `${names[key].name} of ${what}` }]),
    ) as ResourceFields;
    const issues = [...resourceIssues(asked, limits, BOX_FIELDS), ...resourceIssues(inherited, limits, fromTemplate)];
    if (issues.length) throw new RequestValidationError(issues);
    return withDefaults({ ...inherited, ...asked }, limits);
  }

  /** Waits until the sandbox is ready or failed (DeadlineExceededError after `timeoutMs`). */
  async waitSettled(row: SandboxRow, timeoutMs: number): Promise<SandboxRow> {
    const work = this.#work.get(row.id);
    if (work) {
      let timer: Timer | undefined;
      const timedOut = new Promise<'timeout'>((resolve) => {
        timer = this.#clock.setTimeout(() => resolve('timeout'), timeoutMs);
      });
      const outcome = await Promise.race([work.then(() => 'done' as const), timedOut]);
      timer?.cancel();
      if (outcome === 'timeout')
        throw new DeadlineExceededError(`sandbox "${row.name}" was not ready within ${Math.round(timeoutMs / 1000)} s (it is still provisioning)`);
    }
    return (await this.store.byId(row.id)) ?? row;
  }

  async stop(ref: SandboxRef, reason = ''): Promise<SandboxRow> {
    await this.assertAvailable();
    const row = await this.store.get(ref);
    if (row.status !== 'ready') throw new SandboxStateError(`sandbox "${row.name}" is ${row.status}; only a ready sandbox can be stopped`);
    this.deps.onGone(row.id);
    this.#stopping.add(row.id);
    try {
      await this.deps.driver.stop(row.instance);
      return await this.store.move(row.id, 'stopped', { stopped_at: this.now(), status_message: reason });
    } finally {
      this.#stopping.delete(row.id);
    }
  }

  /** True while this manager creates, starts or stops the sandbox (its instance is in between). */
  busy(id: string): boolean {
    return this.#work.has(id) || this.#stopping.has(id);
  }

  /**
   * Starts a stopped (or failed) sandbox again: same files, same TTLs (the idle clock restarts),
   * within its tenant's memory and CPU quota (a stopped sandbox holds none).
   */
  async start(ref: SandboxRef): Promise<SandboxRow> {
    await this.assertAvailable();
    const row = await this.store.get(ref);
    if (row.status === 'ready' || row.status === 'provisioning')
      throw new SandboxStateError(`sandbox "${row.name}" is ${row.status}; only a stopped or failed sandbox can be started`);
    const resources = await this.recordedResources(row);
    const moved = await this.deps.quotas.locked(row.tenant_id, async (trx) => {
      await this.deps.quotas.check(trx, row.tenant_id, { sandboxes: 0, memoryBytes: resources.memoryBytes, cpuMillis: resources.cpuMillis });
      return new SandboxStore(trx).move(row.id, 'provisioning', {
        stopped_at: null,
        last_activity_at: this.now(),
        vcpus: resources.cpuMillis / 1000,
        mem_bytes: String(resources.memoryBytes),
        fs_capacity_bytes: String(resources.storageBytes),
      });
    });
    this.track(row.id, this.provision(moved, 'start'));
    return moved;
  }

  /** The limits a sandbox runs with; one made before they were recorded gets them now (from its template, defaults for the rest). */
  private async recordedResources(row: SandboxRow): Promise<Required<Resources>> {
    const template = row.template_id ? await this.deps.templates.byId(row.template_id) : undefined;
    return effectiveResources(template, rowOverrides(row), this.deps.limits);
  }

  async delete(ref: SandboxRef, reason = 'deleted by its owner'): Promise<void> {
    const row = await this.store.get(ref);
    await this.remove(row, reason);
  }

  /** Tombstones a sandbox and removes its instance (the reaper's path too). */
  async remove(row: SandboxRow, reason: string): Promise<void> {
    if (!(await this.store.tombstone(row.id, reason, this.now()))) return;
    this.deps.onGone(row.id);
    this.deps.logger.info({ sandbox: row.id, name: row.name, reason }, 'sandbox deleted');
    await this.#work.get(row.id);
    // The engine may be down: the tombstone stays, and the reconciler removes the instance once it answers.
    await this.deps.driver
      .remove(row.instance)
      .catch((error: unknown) =>
        this.deps.logger.warn({ err: error, instance: row.instance }, 'removing a sandbox instance failed; the reconciler removes it later'),
      );
  }

  /**
   * The sandbox of a data-plane call, ready: a stopped one is started first (as the official
   * client expects), a provisioning or reattaching one awaited; a failed one is a 409 with its reason.
   */
  async ensureReady(tenantId: string, id: string, timeoutMs = 60_000): Promise<SandboxRow> {
    let row = await this.store.get({ tenantId, id });
    // The last check of the engine: no extra round trip on every command.
    await this.assertAvailable(false);
    if (row.status === 'stopped')
      row = await this.start({ tenantId, id }).catch((error: unknown) => (error instanceof SandboxStateError ? row : Promise.reject(error)));
    // Provisioning, or ready and being reattached after a restart (its egress comes back then).
    if (row.status === 'provisioning' || this.#work.has(row.id)) row = await this.waitSettled(row, timeoutMs);
    if (row.status !== 'ready') throw new SandboxStateError(`sandbox "${row.name}" is ${row.status}${row.status_message ? `: ${row.status_message}` : ''}`);
    return row;
  }

  /**
   * After a restart (and after an engine outage): sandboxes left provisioning are finished (ready if
   * their instance runs). After a restart only (`reattach`), ready ones whose instance still runs
   * get back what the driver keeps outside it (the container driver's auth proxy, which an engine
   * outage leaves alone). Ready ones whose instance is gone are the reaper's to mark failed.
   */
  async resume({ reattach = true }: { reattach?: boolean } = {}): Promise<void> {
    for (const row of await this.store.inStatus(['provisioning'])) {
      if (this.#work.has(row.id)) continue;
      const state = await this.deps.driver.inspect(row.instance).catch(() => ({ state: 'missing' as const }));
      if (state.state === 'running') await this.store.move(row.id, 'ready').catch(() => undefined);
      else this.track(row.id, this.provision(row, state.state === 'stopped' ? 'start' : 'create'));
    }
    if (!reattach) return;
    for (const row of await this.store.inStatus(['ready'])) {
      if (this.#work.has(row.id)) continue;
      const state = await this.deps.driver.inspect(row.instance).catch(() => ({ state: 'missing' as const }));
      if (state.state !== 'running') continue;
      this.track(
        row.id,
        this.specOf(row)
          .then((spec) => this.deps.driver.start(row.instance, spec))
          .catch((error: unknown) => this.deps.logger.warn({ err: error, sandbox: row.id }, 'reattaching a running sandbox failed; its egress may not work')),
      );
    }
  }

  /** Stops every ready sandbox (their files stay; the next command starts one again). */
  async stopAll(reason: string): Promise<void> {
    await Promise.allSettled([...this.#work.values()]);
    for (const row of await this.store.inStatus(['ready'])) {
      await this.stop({ tenantId: row.tenant_id, id: row.id }, reason).catch((error: unknown) =>
        this.deps.logger.warn({ err: error, sandbox: row.id }, 'stopping a sandbox at shutdown failed'),
      );
    }
  }

  async close(): Promise<void> {
    await Promise.allSettled([...this.#work.values()]);
  }

  private track(id: string, work: Promise<void>): void {
    const tracked = work.catch((error: unknown) => this.deps.logger.error({ err: error, sandbox: id }, 'provisioning bookkeeping failed'));
    this.#work.set(id, tracked);
    void tracked.finally(() => {
      if (this.#work.get(id) === tracked) this.#work.delete(id);
    });
  }

  /** Creates (or starts) the instance; the sandbox moves to ready or failed with the reason. */
  private async provision(row: SandboxRow, how: 'create' | 'start'): Promise<void> {
    try {
      const spec = await this.specOf(row);
      if (how === 'start' && (await this.deps.driver.inspect(row.instance)).state === 'stopped') await this.deps.driver.start(row.instance, spec);
      else {
        await this.deps.driver.remove(row.instance);
        await this.deps.driver.create(spec);
      }
      await this.store.move(row.id, 'ready', { last_activity_at: this.now() });
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      this.deps.logger.warn({ sandbox: row.id, err: error }, 'sandbox failed to start');
      if (await this.store.byId(row.id)) await this.store.move(row.id, 'failed', { status_message: message });
    }
  }

  /** The instance spec of a sandbox, from its template as it is now and its own limits. */
  private async specOf(row: SandboxRow): Promise<InstanceSpec> {
    const template = await this.deps.templates.settled(row.template_id ?? '');
    if (!template) throw new Error('its template was deleted');
    if (template.status !== 'ready') throw new Error(`its image could not be pulled: ${template.status_message}`);
    return instanceSpec(this.deps, row.instance, template, {
      overrides: rowOverrides(row),
      proxyConfig: row.proxy_config,
      labels: { [INSTANCE_LABELS.sandbox]: row.id },
    });
  }

  private async resolveTemplate(tenantId: string, source: CreateSandboxInput['source']): Promise<TemplateRow> {
    const { templates } = this.deps;
    if ('snapshotId' in source) return templates.get({ tenantId, kind: 'snapshot', id: source.snapshotId });
    if ('snapshotName' in source) return templates.get({ tenantId, kind: 'snapshot', name: source.snapshotName });
    if ('templateName' in source) return templates.get({ tenantId, kind: 'template', name: source.templateName });
    if (!this.deps.defaultImage) {
      throw new RequestValidationError([
        {
          loc: ['body', 'snapshot_id'],
          msg: 'name a snapshot (snapshot_id or snapshot_name) or a template (template_name): this platform has no default image',
          type: 'missing',
        },
      ]);
    }
    return templates
      .get({ tenantId, kind: 'snapshot', name: 'default' })
      .catch(async () =>
        templates
          .create(tenantId, 'snapshot', { name: 'default', image: this.deps.defaultImage! })
          .catch(() => templates.get({ tenantId, kind: 'snapshot', name: 'default' })),
      );
  }
}

/** Where a create names its template or snapshot, for errors about it. */
function sourceLoc(source: CreateSandboxInput['source']): (string | number)[] {
  if ('snapshotId' in source) return ['body', 'snapshot_id'];
  if ('snapshotName' in source) return ['body', 'snapshot_name'];
  if ('templateName' in source) return ['body', 'template_name'];
  return ['body'];
}
