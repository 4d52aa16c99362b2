/**
 * What counts as an id or a name anywhere in Berth: UUIDs, deployment names, secret names. Every
 * service, the CLI and the request schemas check them here, so a value one accepts is never one
 * another refuses.
 */
import { z } from 'zod';

/**
 * A UUID as the request schemas accept it (`z.uuid()`: RFC 9562 versions 1–8, nil and max), any
 * letter case.
 */
export const Uuid = z.uuid();

export function isUuid(value: string): boolean {
  return Uuid.safeParse(value).success;
}

/** The rule for deployment names, in words, for error messages. */
export const DEPLOYMENT_NAME_RULE = '1-63 characters of a-z, 0-9 and -, starting with a letter or digit';

/** A deployment name: also a DNS label, so it can name Kubernetes objects and hosts. */
export const DeploymentName = z.string().regex(/^[a-z0-9][a-z0-9-]{0,62}$/, { error: `a deployment name is ${DEPLOYMENT_NAME_RULE}` });

export function isDeploymentName(value: string): boolean {
  return DeploymentName.safeParse(value).success;
}

/**
 * The deployment name a folder name suggests: lower-case, accents dropped, every run of other
 * characters one `-`, no `-` at either end, at most 63 characters; `undefined` when nothing is left.
 */
export function toDeploymentName(value: string): string | undefined {
  const name = value
    .toLowerCase()
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+/, '')
    .slice(0, 63)
    .replace(/-+$/, '');
  return isDeploymentName(name) ? name : undefined;
}

/** An environment variable name: a letter or _, then letters, digits or _ (at most 255). */
const ENV_VAR_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,254}$/;

/** The name of an environment variable a caller sets (a sandbox command's `env`). */
export const EnvVarName = z.string().regex(ENV_VAR_NAME, { error: 'Not a valid environment variable name' });

/** The rule for secret names, in words, for error messages. */
export const SECRET_NAME_RULE = 'a secret name is an environment variable name: a letter or _, then letters, digits or _ (at most 255)';

/** A secret's name: it becomes an environment variable of the agent server. */
export const SecretName = z.string().regex(ENV_VAR_NAME, { error: SECRET_NAME_RULE });

export function isSecretName(value: string): boolean {
  return SecretName.safeParse(value).success;
}

/**
 * The tracing project `berth dev` traces a folder into: the folder's name and ` (dev)`, so that a
 * deployment of the same folder (whose project is named after the deployment) never shares it.
 */
export function devTracingProject(folder: string): string {
  return `${folder} (dev)`;
}

/**
 * A deployment's tracing credential, `brt_trace_<deployment id>_<mac>`: what its agent server traces
 * with. The control plane makes it (the mac derived from the platform key); the gateway reads the
 * deployment id from it and asks the control plane for the credential it expects.
 */
const TRACING_CREDENTIAL = /^brt_trace_([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})_([A-Za-z0-9_-]{16,})$/;

export function tracingCredential(deploymentId: string, mac: string): string {
  return `brt_trace_${deploymentId}_${mac}`;
}

/** The deployment a tracing credential names; undefined for any other text (an API key, a token). */
export function tracingCredentialDeployment(value: string): string | undefined {
  return TRACING_CREDENTIAL.exec(value)?.[1];
}

/**
 * A finished upload of a deployment's source, as a revision names it: the `object_path` an upload
 * answers with and `source_revision_config.source_tarball_path` takes,
 * `uploads/<deployment id>/<upload id>.tar.gz`. `uploadRef` is the one place it is written and
 * `parseUploadRef` the one place it is read; the control plane keeps a revision's upload id in a
 * column of its own, so nothing else (SQL included) takes the text apart.
 */
export interface UploadRef {
  deploymentId: string;
  uploadId: string;
}

const UPLOAD_REF = /^uploads\/([^/]+)\/([^/]+)\.tar\.gz$/;

/** The text that names upload `uploadId` of deployment `deploymentId`. */
export function uploadRef(ref: UploadRef): string {
  if (!isUuid(ref.deploymentId) || !isUuid(ref.uploadId)) throw new TypeError(`an upload reference is made of two UUIDs, got ${JSON.stringify(ref)}`);
  return `uploads/${ref.deploymentId}/${ref.uploadId}.tar.gz`;
}

/** The deployment and upload a reference names; undefined for any other text. */
export function parseUploadRef(value: string): UploadRef | undefined {
  const match = UPLOAD_REF.exec(value);
  if (!match || !isUuid(match[1]!) || !isUuid(match[2]!)) return undefined;
  return { deploymentId: match[1]!, uploadId: match[2]! };
}

/** Names of sandboxes and of what they are made from (templates, snapshots, pools, volumes, registries). */
export const SANDBOX_NAME_RULE = '1-63 characters of letters, digits, -, _ and ., starting with a letter or digit';

export const SandboxName = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/, { error: `a name is ${SANDBOX_NAME_RULE}` });

export function isSandboxName(value: string): boolean {
  return SandboxName.safeParse(value).success;
}
