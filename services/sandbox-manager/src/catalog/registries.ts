/**
 * Registries: pull credentials for private images, stored per tenant (password sealed, never
 * returned). Templates and snapshots name one; the driver gets the password only for a pull.
 */
import { randomUUID } from 'node:crypto';
import { isForeignKeyViolation, isUniqueViolation, type Kysely, type Selectable } from '@berth/db';
import { ConflictError, NotFoundError } from '@berth/errors';
import { isUuid } from '@berth/ids';
import type { SecretBox } from '@berth/secret-box';
import type { RegistryCredentials } from '../drivers/driver.js';

import type { RegistriesTable, SandboxTables } from '../tables.js';

export type RegistryRow = Selectable<RegistriesTable>;

export interface RegistryInput {
  name: string;
  server: string;
  username: string;
  password: string;
  insecure: boolean;
}

export class Registries {
  constructor(
    private readonly db: Kysely<SandboxTables>,
    private readonly box: SecretBox,
  ) {}

  async create(tenantId: string, input: RegistryInput): Promise<RegistryRow> {
    try {
      return await this.db
        .insertInto('registries')
        .values({
          id: randomUUID(),
          tenant_id: tenantId,
          name: input.name,
          server: input.server,
          username: input.username,
          password_sealed: this.box.seal(input.password),
          insecure: input.insecure,
        })
        .returningAll()
        .executeTakeFirstOrThrow();
    } catch (error) {
      if (isUniqueViolation(error)) throw new ConflictError(`a registry named "${input.name}" already exists`, { cause: error });
      throw error;
    }
  }

  async list(tenantId: string): Promise<RegistryRow[]> {
    return this.db.selectFrom('registries').selectAll().where('tenant_id', '=', tenantId).orderBy('name').execute();
  }

  async get(tenantId: string, name: string): Promise<RegistryRow> {
    const row = await this.db.selectFrom('registries').selectAll().where('tenant_id', '=', tenantId).where('name', '=', name).executeTakeFirst();
    if (!row) throw new NotFoundError(`registry "${name}" not found`);
    return row;
  }

  async byId(tenantId: string, id: string): Promise<RegistryRow> {
    if (!isUuid(id)) throw new NotFoundError(`registry ${id} not found`);
    const row = await this.db.selectFrom('registries').selectAll().where('tenant_id', '=', tenantId).where('id', '=', id).executeTakeFirst();
    if (!row) throw new NotFoundError(`registry ${id} not found`);
    return row;
  }

  async delete(tenantId: string, name: string): Promise<void> {
    try {
      const deleted = await this.db.deleteFrom('registries').where('tenant_id', '=', tenantId).where('name', '=', name).executeTakeFirst();
      if (deleted.numDeletedRows === 0n) throw new NotFoundError(`registry "${name}" not found`);
    } catch (error) {
      if (isForeignKeyViolation(error)) throw new ConflictError(`registry "${name}" is used by a template or snapshot`, { cause: error });
      throw error;
    }
  }

  /** The decrypted credentials of a registry, for one pull. */
  credentials(row: RegistryRow): RegistryCredentials {
    return { server: row.server, username: row.username, password: this.box.open(row.password_sealed) };
  }
}
