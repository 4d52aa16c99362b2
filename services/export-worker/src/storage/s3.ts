/**
 * Object storage of a destination: the S3 client for it, and the one classification of storage
 * failures into words a user can act on and a kind the export runner acts on (fail fast, or retry).
 */
import { S3Client } from '@aws-sdk/client-s3';
import { EGRESS_REFUSED, assertPublicUrl, publicOnlyAgents } from '@berth/egress';

/** Where a destination writes (no secret in here). */
export interface StorageLocation {
  bucket_name: string;
  /** Root folder in the bucket; '' for the bucket's root. */
  prefix: string;
  /** AWS region; with endpoint_url, the signing region. @default us-east-1 */
  region?: string;
  /** An S3-compatible provider (MinIO, GCS, ...), addressed path-style. */
  endpoint_url?: string;
}

export interface StorageCredentials {
  access_key_id: string;
  secret_access_key: string;
  session_token?: string;
}

export interface StorageClientOptions {
  /** Attempts per request, the SDK's own retries of transient failures included. @default 3 */
  maxAttempts?: number;
  /** @default 10000 */
  connectionTimeoutMs?: number;
  /** @default 120000 */
  requestTimeoutMs?: number;
  /**
   * Let an endpoint_url be (or resolve to) a loopback or private address — a local MinIO, an
   * in-cluster object store. Otherwise a tenant's destination could make the export-worker reach
   * the platform's own services or a cloud metadata endpoint.
   * @default false
   */
  allowPrivateEndpoints?: boolean;
}

/**
 * An S3 client for a destination: AWS by region, or an S3-compatible endpoint path-style. Throws
 * (an EgressRefusedError) for an endpoint at a private IP literal unless those are allowed.
 */
export function storageClient(location: StorageLocation, credentials: StorageCredentials, options: StorageClientOptions = {}): S3Client {
  if (location.endpoint_url && !options.allowPrivateEndpoints) assertPublicUrl(new URL(location.endpoint_url));
  return new S3Client({
    region: location.region ?? 'us-east-1',
    // Providers behind an endpoint (MinIO, s3rver, GCS's XML API) all take path-style requests;
    // virtual-host style needs DNS per bucket that a self-hosted endpoint rarely has.
    ...(location.endpoint_url ? { endpoint: location.endpoint_url, forcePathStyle: true } : {}),
    credentials: {
      accessKeyId: credentials.access_key_id,
      secretAccessKey: credentials.secret_access_key,
      ...(credentials.session_token ? { sessionToken: credentials.session_token } : {}),
    },
    maxAttempts: options.maxAttempts ?? 3,
    requestHandler: {
      connectionTimeout: options.connectionTimeoutMs ?? 10_000,
      requestTimeout: options.requestTimeoutMs ?? 120_000,
      ...(options.allowPrivateEndpoints ? {} : publicOnlyAgents()),
    },
  });
}

/**
 * - `missing_bucket`: the bucket does not exist (or its name is not valid);
 * - `access_denied`: the credentials were refused, or lack a permission;
 * - `bad_endpoint`: nothing answers at the endpoint (unknown host, connection refused), or the
 *   bucket lives in another region;
 * - `transient`: the storage failed this time (5xx, throttling, timeouts, dropped connections).
 */
export type StorageErrorKind = 'missing_bucket' | 'access_denied' | 'bad_endpoint' | 'transient';

/** A storage failure in words (`message`), with its kind; `cause` is what the SDK threw. */
export class StorageError extends Error {
  constructor(
    readonly kind: StorageErrorKind,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'StorageError';
  }
}

const CREDENTIAL_CODES = new Set([
  'AccessDenied',
  'InvalidAccessKeyId',
  'SignatureDoesNotMatch',
  'ExpiredToken',
  'InvalidToken',
  'TokenRefreshRequired',
  'AllAccessDisabled',
  'AccountProblem',
  'Forbidden',
]);
const MISSING_BUCKET_CODES = new Set(['NoSuchBucket', 'InvalidBucketName']);
const REDIRECT_CODES = new Set(['PermanentRedirect', 'AuthorizationHeaderMalformed', 'IllegalLocationConstraintException']);
const THROTTLE_CODES = new Set([
  'SlowDown',
  'Throttling',
  'ThrottlingException',
  'RequestTimeout',
  'RequestTimeTooSkewed',
  'InternalError',
  'ServiceUnavailable',
  'TimeoutError',
  'RequestTimeoutException',
]);
const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ERR_INVALID_URL',
  'CERT_HAS_EXPIRED',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'ERR_TLS_CERT_ALTNAME_INVALID',
]);

interface SdkError {
  name?: string;
  code?: string;
  message?: string;
  errors?: SdkError[];
  cause?: SdkError;
  $metadata?: { httpStatusCode?: number };
}

/**
 * What a storage failure means. `where` names the bucket and endpoint for the message. A
 * StorageError is returned as it is.
 */
export function classifyStorageError(error: unknown, where: StorageLocation): StorageError {
  if (error instanceof StorageError) return error;
  const e = (typeof error === 'object' && error !== null ? error : { message: String(error) }) as SdkError;
  const name = e.name ?? '';
  const status = e.$metadata?.httpStatusCode;
  const detail = `${name && name !== 'Error' ? `${name}: ` : ''}${e.message ?? ''}`.trim();
  const endpoint = where.endpoint_url ?? `AWS S3 (${where.region ?? 'us-east-1'})`;
  const bucket = JSON.stringify(where.bucket_name);
  const make = (kind: StorageErrorKind, words: string) => new StorageError(kind, `${words} (${detail || 'no detail'})`, { cause: error });

  if (MISSING_BUCKET_CODES.has(name) || (status === 404 && name === 'NotFound')) {
    return make('missing_bucket', name === 'InvalidBucketName' ? `bucket name ${bucket} is not valid` : `bucket ${bucket} does not exist at ${endpoint}`);
  }
  if (CREDENTIAL_CODES.has(name) || status === 401 || status === 403) {
    return make('access_denied', `access denied to bucket ${bucket}: the credentials are wrong or lack permission`);
  }
  if (REDIRECT_CODES.has(name) || status === 301) {
    return make('bad_endpoint', `bucket ${bucket} is not served at ${endpoint} (wrong region or endpoint)`);
  }
  const code = networkCode(e);
  if (code === EGRESS_REFUSED)
    return make(
      'bad_endpoint',
      `the storage endpoint ${endpoint} is not a public address, and this platform does not write to private ones (its operator can allow them)`,
    );
  if (code && UNREACHABLE_CODES.has(code)) return make('bad_endpoint', `cannot reach the storage endpoint ${endpoint} (${code})`);
  if (THROTTLE_CODES.has(name) || (status !== undefined && (status >= 500 || status === 429)) || code) {
    return make('transient', `the storage at ${endpoint} failed this time`);
  }
  // Unknown answers are tried again (bounded): a lasting one ends as a failed run naming it.
  return make('transient', `the storage at ${endpoint} answered unexpectedly`);
}

/** Whether `error` came from the storage or the way to it (an SDK answer, a network failure), not from our code. */
export function isStorageFailure(error: unknown): boolean {
  if (error instanceof StorageError) return true;
  if (typeof error !== 'object' || error === null) return false;
  const e = error as SdkError;
  return e.$metadata !== undefined || networkCode(e) !== undefined || THROTTLE_CODES.has(e.name ?? '');
}

/** The system error code of a network failure (Node puts several in an AggregateError). */
function networkCode(e: SdkError): string | undefined {
  if (e.code && /^E[A-Z_]+$|^ERR_|^CERT_|^DEPTH_/.test(e.code)) return e.code;
  for (const inner of [...(e.errors ?? []), ...(e.cause && typeof e.cause === 'object' ? [e.cause] : [])]) {
    const code = networkCode(inner);
    if (code) return code;
  }
  // The SDK wraps a socket error in one that keeps only its words.
  return /\b(E[A-Z]{4,})\b/.exec(e.message ?? '')?.[1];
}
