/**
 * Named persistent volumes of a tenant. Templates mount them by name; the driver creates the
 * backing volume (a Docker volume, a PVC) on first use and keeps it until the volume is deleted.
 */
import { randomUUID } from 'node:crypto';
import { isUniqueViolation, sql, type Kysely, type Selectable } from '@berth/db';
import { ConflictError, NotFoundError, RequestValidationError } from '@berth/errors';
import { bytesQuantity, parseQuantity, QuantityError } from '@berth/quantity';
import type { SandboxTables, VolumesTable } from '../tables.js';

export type VolumeRow = Selectable<VolumesTable>;

/** The driver-level name of a volume: unique, and a DNS-1123 label whatever the user named it. */
export function driverVolumeName(row: Pick<VolumeRow, 'id'>): string {
  return `berth-vol-${row.id}`;
}

export class Volumes {
  /** @param maxBytes the largest volume (SandboxLimits.maxStorageBytes) */
  constructor(
    private readonly db: Kysely<SandboxTables>,
    private readonly removeBacking: (driverName: string) => Promise<void>,
    private readonly maxBytes: number,
  ) {}

  async create(tenantId: string, name: string, size: string): Promise<VolumeRow> {
    let bytes: number;
    try {
      bytes = parseQuantity(size);
    } catch (error) {
      if (error instanceof QuantityError)
        throw new RequestValidationError([{ loc: ['body', 'size'], msg: error.message, type: 'value_error' }], { cause: error });
      throw error;
    }
    if (bytes < 1 || bytes > this.maxBytes) {
      throw new RequestValidationError([
        {
          loc: ['body', 'size'],
          msg: `size must be at least 1 byte and at most ${bytesQuantity(this.maxBytes)}: this platform's maximum`,
          type: 'value_error',
        },
      ]);
    }
    try {
      return await this.db
        .insertInto('volumes')
        .values({ id: randomUUID(), tenant_id: tenantId, name, size, size_bytes: Math.round(bytes) })
        .returningAll()
        .executeTakeFirstOrThrow();
    } catch (error) {
      if (isUniqueViolation(error)) throw new ConflictError(`a volume named "${name}" already exists`, { cause: error });
      throw error;
    }
  }

  async list(tenantId: string): Promise<VolumeRow[]> {
    return this.db.selectFrom('volumes').selectAll().where('tenant_id', '=', tenantId).orderBy('name').execute();
  }

  async get(tenantId: string, name: string): Promise<VolumeRow> {
    const row = await this.db.selectFrom('volumes').selectAll().where('tenant_id', '=', tenantId).where('name', '=', name).executeTakeFirst();
    if (!row) throw new NotFoundError(`volume "${name}" not found`);
    return row;
  }

  /** Deletes a volume and its data; refused while a template mounts it. */
  async delete(tenantId: string, name: string): Promise<void> {
    const row = await this.get(tenantId, name);
    const user = await this.db
      .selectFrom('templates')
      .select('name')
      .where('tenant_id', '=', tenantId)
      .where(sql<boolean>`volumes @> ${JSON.stringify([{ volume_name: name }])}::jsonb`)
      .executeTakeFirst();
    if (user) throw new ConflictError(`volume "${name}" is mounted by template "${user.name}"`);
    await this.removeBacking(driverVolumeName(row));
    await this.db.deleteFrom('volumes').where('id', '=', row.id).execute();
  }
}
