/**
 * Export destinations: where a tenant's exports write (an S3-compatible bucket and prefix). A
 * destination is saved only after a real test write under `<prefix>/tmp/` succeeded (the object is
 * removed again when the credentials may delete). Credentials are sealed with the platform key
 * (AES-256-GCM) and never leave this module except as an S3 client: only their key names are shown.
 */
import { randomUUID } from 'node:crypto';
import { DeleteObjectCommand, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import type { Kysely } from '@berth/db';
import { ConflictError, InvalidArgumentError, NotFoundError, RequestValidationError } from '@berth/errors';
import type { Logger } from '@berth/log';
import type { SecretBox } from '@berth/secret-box';
import { classifyStorageError, storageClient, type StorageClientOptions, type StorageCredentials, type StorageLocation } from '../storage/s3.js';
import { exportLifecycle } from '../exports/lifecycle.js';
import type { BulkExportTables, DestinationConfigJson, DestinationsTable } from '../exports/tables.js';

export interface DestinationInput {
  destination_type: string;
  display_name: string;
  config: StorageLocation;
  credentials: StorageCredentials;
}

export interface DestinationUpdate {
  display_name?: string;
  credentials?: StorageCredentials;
}

/** A destination as shown: no credentials, only their key names. */
export interface DestinationView {
  id: string;
  tenant_id: string;
  destination_type: string;
  display_name: string;
  config: DestinationConfigJson;
  credentials_keys: string[];
  created_at: Date;
  updated_at: Date;
}

/** What an export run writes with. */
export interface OpenDestination {
  location: StorageLocation;
  client: S3Client;
}

/** The destination of an export is gone (a fatal error for its runs). */
export class DestinationGoneError extends NotFoundError {}

export interface DestinationsOptions {
  logger: Logger;
  /** Options of the clients that write exports (the test write uses short timeouts and one attempt). */
  clientOptions?: StorageClientOptions;
}

const COLUMNS = ['id', 'tenant_id', 'destination_type', 'display_name', 'config', 'credentials_keys', 'created_at', 'updated_at'] as const;

export class Destinations {
  constructor(
    private readonly db: Kysely<BulkExportTables>,
    private readonly box: SecretBox,
    private readonly options: DestinationsOptions,
  ) {}

  async create(tenantId: string, input: DestinationInput): Promise<DestinationView> {
    if (input.destination_type !== 's3') throw invalid(['destination_type'], 'only "s3" destinations exist', 'enum');
    const config = normalizeLocation(input.config);
    await this.check(config, input.credentials);
    return this.db
      .insertInto('destinations')
      .values({
        id: randomUUID(),
        tenant_id: tenantId,
        destination_type: input.destination_type,
        display_name: input.display_name,
        config: JSON.stringify(config),
        ...this.sealed(input.credentials),
      })
      .returning(COLUMNS)
      .executeTakeFirstOrThrow();
  }

  async list(tenantId: string, page: { limit: number; offset: number }): Promise<DestinationView[]> {
    return this.db
      .selectFrom('destinations')
      .select(COLUMNS)
      .where('tenant_id', '=', tenantId)
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .limit(page.limit)
      .offset(page.offset)
      .execute();
  }

  async get(tenantId: string, id: string): Promise<DestinationView> {
    const row = await this.db.selectFrom('destinations').select(COLUMNS).where('tenant_id', '=', tenantId).where('id', '=', id).executeTakeFirst();
    if (!row) throw new NotFoundError(`destination ${id} not found`);
    return row;
  }

  /** Renames, or rotates the credentials (checked by a test write first; runs started later use them). */
  async update(tenantId: string, id: string, update: DestinationUpdate): Promise<DestinationView> {
    const current = await this.get(tenantId, id);
    if (update.credentials) await this.check(current.config, update.credentials);
    const row = await this.db
      .updateTable('destinations')
      .set({
        updated_at: new Date(),
        ...(update.display_name !== undefined ? { display_name: update.display_name } : {}),
        ...(update.credentials ? this.sealed(update.credentials) : {}),
      })
      .where('tenant_id', '=', tenantId)
      .where('id', '=', id)
      .returning(COLUMNS)
      .executeTakeFirst();
    if (!row) throw new NotFoundError(`destination ${id} not found`);
    return row;
  }

  /** Refused (409) while an export that is not final, or a schedule, writes to it. */
  async delete(tenantId: string, id: string): Promise<void> {
    await this.db.transaction().execute(async (tx) => {
      // Export creation takes a share lock on the destination: the two cannot cross.
      const row = await tx.selectFrom('destinations').select('id').where('tenant_id', '=', tenantId).where('id', '=', id).forUpdate().executeTakeFirst();
      if (!row) throw new NotFoundError(`destination ${id} not found`);
      const user = await tx
        .selectFrom('exports')
        .select(['id', 'status'])
        .where('destination_id', '=', id)
        .where('status', 'in', exportLifecycle.unfinished)
        .limit(1)
        .executeTakeFirst();
      if (user) throw new ConflictError(`destination ${id} is used by export ${user.id} (${user.status}): cancel it or wait until it finishes`);
      await tx.deleteFrom('destinations').where('id', '=', id).execute();
    });
  }

  /** The bucket and a client with the destination's current credentials. */
  async open(tenantId: string, id: string): Promise<OpenDestination> {
    const row = await this.db
      .selectFrom('destinations')
      .select(['config', 'credentials_sealed'])
      .where('tenant_id', '=', tenantId)
      .where('id', '=', id)
      .executeTakeFirst();
    if (!row) throw new DestinationGoneError(`destination ${id} no longer exists`);
    const credentials = JSON.parse(this.box.open(row.credentials_sealed)) as StorageCredentials;
    return { location: row.config, client: storageClient(row.config, credentials, this.options.clientOptions) };
  }

  private sealed(credentials: StorageCredentials): Pick<DestinationsTable, 'credentials_sealed' | 'credentials_keys'> {
    const kept: StorageCredentials = {
      access_key_id: credentials.access_key_id,
      secret_access_key: credentials.secret_access_key,
      ...(credentials.session_token ? { session_token: credentials.session_token } : {}),
    };
    return { credentials_sealed: this.box.seal(JSON.stringify(kept)), credentials_keys: Object.keys(kept) };
  }

  /** Writes (and removes, when permitted) a small object under `<prefix>/tmp/`; a failure is a 400 naming the storage error. */
  private async check(location: StorageLocation, credentials: StorageCredentials): Promise<void> {
    const key = `${location.prefix ? `${location.prefix}/` : ''}tmp/berth-destination-check-${randomUUID()}.txt`;
    let client: S3Client | undefined;
    try {
      client = storageClient(location, credentials, { ...this.options.clientOptions, maxAttempts: 1, connectionTimeoutMs: 5000, requestTimeoutMs: 20_000 });
      await client.send(
        new PutObjectCommand({
          Bucket: location.bucket_name,
          Key: key,
          Body: 'Berth checked that it may write here. This object may be deleted.\n',
          ContentType: 'text/plain',
        }),
      );
    } catch (error) {
      client?.destroy();
      const reason = classifyStorageError(error, location);
      throw new InvalidArgumentError(`the destination cannot be written: ${reason.message}`, { cause: reason });
    }
    try {
      await client.send(new DeleteObjectCommand({ Bucket: location.bucket_name, Key: key }));
    } catch (error) {
      // Deleting is optional (PutObject is the permission exports need): the object stays.
      this.options.logger.info({ key, reason: classifyStorageError(error, location).message }, 'the destination check object could not be removed');
    } finally {
      client.destroy();
    }
  }
}

function invalid(loc: string[], msg: string, type = 'value_error'): RequestValidationError {
  return new RequestValidationError([{ loc: ['body', ...loc], msg, type }]);
}

/** Trims the prefix's slashes and checks the endpoint, so keys join as `<prefix>/...`. */
function normalizeLocation(config: StorageLocation): DestinationConfigJson {
  if (!config.bucket_name) throw invalid(['config', 'bucket_name'], 'a bucket name is required', 'missing');
  if (config.endpoint_url !== undefined) {
    let url: URL | undefined;
    try {
      url = new URL(config.endpoint_url);
    } catch {
      url = undefined;
    }
    if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:')) throw invalid(['config', 'endpoint_url'], 'must be an http(s) URL', 'url_format');
  } else if (!config.region) {
    throw invalid(['config'], 'either region (AWS S3) or endpoint_url (an S3-compatible provider) is required', 'missing');
  }
  return {
    bucket_name: config.bucket_name,
    prefix: config.prefix.replace(/^\/+|\/+$/g, ''),
    ...(config.region ? { region: config.region } : {}),
    ...(config.endpoint_url ? { endpoint_url: config.endpoint_url } : {}),
  };
}
