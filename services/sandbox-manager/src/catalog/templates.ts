/**
 * Templates and snapshots: an image (pulled once per change, with the registry's credentials) and
 * the defaults of sandboxes made from it (resources, volumes, auth proxy rules, run config).
 * Templates are addressed by name, snapshots by id; both are rows of one table. Every change that
 * makes running warm-pool members stale bumps `version`.
 */
import { randomUUID } from 'node:crypto';
import { posix } from 'node:path';
import { isUniqueViolation, sql, type Kysely, type Selectable } from '@berth/db';
import { ConflictError, NotFoundError, RequestValidationError, type ValidationIssue } from '@berth/errors';
import { isUuid } from '@berth/ids';
import { IllegalTransitionError } from '@berth/lifecycle';
import type { Logger } from '@berth/log';
import type { ProxyConfig } from '@berth/proto';
import { parseQuantity, QuantityError } from '@berth/quantity';
import type { SecretBox } from '@berth/secret-box';
import { PLATFORM_MOUNTS } from '../drivers/container/container-spec.js';
import type { ImageSource, Resources, SandboxDriver } from '../drivers/driver.js';
import { imageLifecycle, type ImageStatus } from '../lifecycle.js';
import { checkResources, templateFields, type ResourceFields, type ResourceKey, type SandboxLimits } from '../sandboxes/limits.js';
import type { ResourcesJson, RunConfigJson, SandboxTables, TemplatesTable, VolumeMountJson } from '../tables.js';
import { EMPTY_PROXY_CONFIG, storeProxyConfig } from './proxy-config.js';
import type { Registries } from './registries.js';

export type TemplateRow = Selectable<TemplatesTable>;
export type TemplateKind = TemplateRow['kind'];

/** How a template is found: snapshots by id, templates by name (snapshots by name too, for boxes). */
export type TemplateRef = { tenantId: string; kind: TemplateKind } & ({ id: string } | { name: string });

export interface TemplateInput {
  name: string;
  image: string;
  resources?: ResourcesJson;
  volumes?: VolumeMountJson[];
  proxyConfig?: ProxyConfig;
  registryId?: string;
  runConfig?: RunConfigJson;
}

export interface TemplateChange {
  image?: string;
  resources?: ResourcesJson;
  volumes?: VolumeMountJson[];
  proxyConfig?: ProxyConfig;
  /** null removes the registry. */
  registryId?: string | null;
}

const what = (kind: TemplateKind) => (kind === 'snapshot' ? 'snapshot' : 'template');

const JSON_KEYS: Record<keyof ResourcesJson, ResourceKey> = { cpu: 'cpuMillis', memory: 'memoryBytes', storage: 'storageBytes' };

/** Parses a template's quantities; a malformed one is a 422 at its REST location (`fields`). */
export function resourcesOf(json: ResourcesJson, fields: ResourceFields = templateFields('template')): Resources {
  const issues: ValidationIssue[] = [];
  const parse = (key: keyof ResourcesJson): number | undefined => {
    const text = json[key];
    if (text === undefined) return undefined;
    try {
      const value = parseQuantity(text);
      if (value <= 0) throw new QuantityError(`${key} must be more than 0`);
      return value;
    } catch (error) {
      if (!(error instanceof QuantityError)) throw error;
      issues.push({ loc: fields[JSON_KEYS[key]].loc, msg: error.message, type: 'value_error' });
      return undefined;
    }
  };
  const cpu = parse('cpu');
  const memory = parse('memory');
  const storage = parse('storage');
  if (issues.length) throw new RequestValidationError(issues);
  return {
    ...(cpu !== undefined ? { cpuMillis: Math.max(1, Math.round(cpu * 1000)) } : {}),
    ...(memory !== undefined ? { memoryBytes: Math.round(memory) } : {}),
    ...(storage !== undefined ? { storageBytes: Math.round(storage) } : {}),
  };
}

/** A template's resources as stored; one that cannot be parsed (stored before they were checked) sets none. */
export function storedResourcesOf(json: ResourcesJson): Resources {
  try {
    return resourcesOf(json);
  } catch (error) {
    if (error instanceof RequestValidationError) return {};
    throw error;
  }
}

export interface TemplatesOptions {
  logger: Logger;
  /** A template's or snapshot's resources may not exceed the maxima. */
  limits: SandboxLimits;
  /** Registries pulled over plain HTTP whatever a registry row says (a local test registry). */
  insecureRegistries?: readonly string[];
}

export class Templates {
  /** Pulls in flight, by template id: creates wait for them. */
  readonly #pulls = new Map<string, Promise<void>>();

  constructor(
    private readonly db: Kysely<SandboxTables>,
    private readonly box: SecretBox,
    private readonly registries: Registries,
    private readonly driver: SandboxDriver,
    private readonly options: TemplatesOptions,
  ) {}

  async create(tenantId: string, kind: TemplateKind, input: TemplateInput): Promise<TemplateRow> {
    this.checkResources(kind, input.resources ?? {});
    const volumes = input.volumes ?? [];
    await this.checkVolumes(tenantId, volumes);
    if (input.registryId) await this.registries.byId(tenantId, input.registryId);
    const proxy = input.proxyConfig ? storeProxyConfig(input.proxyConfig, this.box, ['body', 'proxy_config']) : EMPTY_PROXY_CONFIG;
    let row: TemplateRow;
    try {
      row = await this.db
        .insertInto('templates')
        .values({
          id: randomUUID(),
          tenant_id: tenantId,
          kind,
          name: input.name,
          image: input.image,
          registry_id: input.registryId ?? null,
          resources: JSON.stringify(input.resources ?? {}),
          volumes: JSON.stringify(volumes),
          proxy_config: JSON.stringify(proxy),
          run_config: JSON.stringify(input.runConfig ?? null),
          status: imageLifecycle.initial[0]!,
          version: 1,
        })
        .returningAll()
        .executeTakeFirstOrThrow();
    } catch (error) {
      if (isUniqueViolation(error)) throw new ConflictError(`a ${what(kind)} named "${input.name}" already exists`, { cause: error });
      throw error;
    }
    this.pull(row);
    return row;
  }

  async get(ref: TemplateRef): Promise<TemplateRow> {
    // Ids are uuid columns: anything else is unknown, not a query error.
    if ('id' in ref && !isUuid(ref.id)) throw new NotFoundError(`${what(ref.kind)} ${ref.id} not found`);
    let query = this.db.selectFrom('templates').selectAll().where('tenant_id', '=', ref.tenantId).where('kind', '=', ref.kind);
    query = 'id' in ref ? query.where('id', '=', ref.id) : query.where('name', '=', ref.name);
    const row = await query.executeTakeFirst();
    if (!row) throw new NotFoundError(`${what(ref.kind)} ${'id' in ref ? ref.id : `"${ref.name}"`} not found`);
    return row;
  }

  async byId(id: string): Promise<TemplateRow | undefined> {
    return this.db.selectFrom('templates').selectAll().where('id', '=', id).executeTakeFirst();
  }

  /** A page of a tenant's templates (or snapshots), by name; one more row than asked says there are more. */
  async list(
    tenantId: string,
    kind: TemplateKind,
    page: { nameContains?: string; limit: number; offset: number },
  ): Promise<{ rows: TemplateRow[]; hasMore: boolean }> {
    let query = this.db.selectFrom('templates').selectAll().where('tenant_id', '=', tenantId).where('kind', '=', kind);
    if (page.nameContains) query = query.where(sql<boolean>`strpos(lower(name), lower(${page.nameContains})) > 0`);
    const rows = await query
      .orderBy('name')
      .orderBy('id')
      .limit(page.limit + 1)
      .offset(page.offset)
      .execute();
    return { rows: rows.slice(0, page.limit), hasMore: rows.length > page.limit };
  }

  async update(ref: TemplateRef, change: TemplateChange): Promise<TemplateRow> {
    const current = await this.get(ref);
    if (change.resources) this.checkResources(current.kind, change.resources);
    if (change.volumes) await this.checkVolumes(ref.tenantId, change.volumes);
    if (change.registryId) await this.registries.byId(ref.tenantId, change.registryId);
    const repull =
      (change.image !== undefined && change.image !== current.image) || (change.registryId !== undefined && change.registryId !== current.registry_id);
    const values: Record<string, unknown> = { updated_at: new Date(), version: sql`version + 1` };
    if (change.image !== undefined) values.image = change.image;
    if (change.resources) values.resources = JSON.stringify(change.resources);
    if (change.volumes) values.volumes = JSON.stringify(change.volumes);
    if (change.proxyConfig) values.proxy_config = JSON.stringify(storeProxyConfig(change.proxyConfig, this.box, ['body', 'proxy_config']));
    if (change.registryId !== undefined) values.registry_id = change.registryId;
    const row = await this.db.transaction().execute(async (tx) => {
      const updated = await tx.updateTable('templates').set(values).where('id', '=', current.id).returningAll().executeTakeFirstOrThrow();
      if (!repull) return updated;
      // The new image is pulled again: the same transaction moves it to building.
      const moved = await this.moveImage(updated.id, updated.version, 'building', { status_message: '', image_digest: null }, tx);
      if (!moved) throw new IllegalTransitionError({ entity: imageLifecycle.entity, id: current.id, from: updated.status, to: 'building' });
      return moved;
    });
    if (repull) this.pull(row);
    return row;
  }

  /** Deletes a template; refused while a sandbox or a pool uses it. */
  async delete(ref: TemplateRef): Promise<void> {
    const row = await this.get(ref);
    const sandbox = await this.db.selectFrom('sandboxes').select('name').where('template_id', '=', row.id).where('deleted_at', 'is', null).executeTakeFirst();
    if (sandbox) throw new ConflictError(`${what(ref.kind)} "${row.name}" is used by sandbox "${sandbox.name}"`);
    const pool = await this.db.selectFrom('pools').select('name').where('template_id', '=', row.id).executeTakeFirst();
    if (pool) throw new ConflictError(`${what(ref.kind)} "${row.name}" is used by pool "${pool.name}"`);
    await this.db.deleteFrom('templates').where('id', '=', row.id).execute();
  }

  /** The image of a template as the driver pulls it. */
  async imageSource(row: TemplateRow): Promise<ImageSource> {
    const registry = row.registry_id ? await this.registries.byId(row.tenant_id, row.registry_id) : undefined;
    const insecure = [...(this.options.insecureRegistries ?? []), ...(registry?.insecure ? [registry.server] : [])];
    return {
      reference: row.image,
      ...(registry ? { credentials: this.registries.credentials(registry) } : {}),
      ...(insecure.length ? { insecureRegistries: insecure } : {}),
      ...(row.image_user !== null ? { user: row.image_user } : {}),
    };
  }

  /** Resolves once the template's current pull has finished (whatever its outcome). */
  async settled(id: string): Promise<TemplateRow | undefined> {
    await this.#pulls.get(id);
    return this.byId(id);
  }

  /** Pulls the image in the background; the row moves to ready or failed (unless changed meanwhile). */
  pull(row: TemplateRow): void {
    const previous = this.#pulls.get(row.id) ?? Promise.resolve();
    const pulling = previous.then(async () => {
      try {
        const info = await this.driver.pullImage(await this.imageSource(row));
        await this.moveImage(row.id, row.version, 'ready', { image_digest: info.digest ?? null, image_user: info.user, status_message: '' });
      } catch (error) {
        const message = error instanceof Error ? error.message : String(error);
        this.options.logger.warn({ template: row.id, image: row.image, err: error }, 'image pull failed');
        await this.moveImage(row.id, row.version, 'failed', { status_message: message });
      }
    });
    const tracked = pulling.catch((error: unknown) => this.options.logger.error({ err: error, template: row.id }, 'recording a pull failed'));
    this.#pulls.set(row.id, tracked);
    void tracked.finally(() => {
      if (this.#pulls.get(row.id) === tracked) this.#pulls.delete(row.id);
    });
  }

  /** Pulls of templates left `building` by a manager that stopped mid-pull. */
  async resumePulls(): Promise<void> {
    const rows = await this.db.selectFrom('templates').selectAll().where('status', '=', 'building').execute();
    for (const row of rows) if (!this.#pulls.has(row.id)) this.pull(row);
  }

  /**
   * The one status change of a template's image; a pull of an older version changes nothing.
   * Returns the row it moved, or undefined when it did not move. `db` may be a transaction.
   */
  private async moveImage(
    id: string,
    version: string,
    to: ImageStatus,
    values: Partial<Pick<TemplateRow, 'image_digest' | 'image_user' | 'status_message'>>,
    db: Kysely<SandboxTables> = this.db,
  ): Promise<TemplateRow | undefined> {
    return db
      .updateTable('templates')
      .set({ ...values, status: to, updated_at: new Date() })
      .where('id', '=', id)
      .where('version', '=', version)
      .where('status', 'in', imageLifecycle.sourcesOf(to))
      .returningAll()
      .executeTakeFirst();
  }

  /** A 422 for resources that are malformed, or beyond the operator's maxima. */
  private checkResources(kind: TemplateKind, json: ResourcesJson): void {
    const fields = templateFields(kind);
    checkResources(resourcesOf(json, fields), this.options.limits, fields);
  }

  private async checkVolumes(tenantId: string, volumes: VolumeMountJson[]): Promise<void> {
    const issues: ValidationIssue[] = [];
    const paths = new Set<string>();
    for (const [i, mount] of volumes.entries()) {
      if (!mount.mount_path.startsWith('/') || mount.mount_path === '/')
        issues.push({ loc: ['body', 'volumes', i, 'mount_path'], msg: 'mount_path must be an absolute path other than /', type: 'value_error' });
      // There the platform mounts the agent and its folders, which a volume would stand in for.
      const normalized = posix.normalize(mount.mount_path);
      if (normalized === PLATFORM_MOUNTS || normalized.startsWith(`${PLATFORM_MOUNTS}/`)) {
        issues.push({
          loc: ['body', 'volumes', i, 'mount_path'],
          msg: `mount_path may not be ${PLATFORM_MOUNTS} or under it: the platform's own mounts are there`,
          type: 'value_error',
        });
      }
      if (paths.has(mount.mount_path))
        issues.push({ loc: ['body', 'volumes', i, 'mount_path'], msg: `two volumes are mounted at ${mount.mount_path}`, type: 'value_error' });
      paths.add(mount.mount_path);
      const exists = await this.db
        .selectFrom('volumes')
        .select('id')
        .where('tenant_id', '=', tenantId)
        .where('name', '=', mount.volume_name)
        .executeTakeFirst();
      if (!exists)
        issues.push({
          loc: ['body', 'volumes', i, 'volume_name'],
          msg: `volume "${mount.volume_name}" does not exist (create it with POST /api/v2/sandboxes/volumes)`,
          type: 'value_error',
        });
    }
    if (issues.length) throw new RequestValidationError(issues);
  }
}
