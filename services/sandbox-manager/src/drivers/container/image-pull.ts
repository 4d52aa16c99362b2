/**
 * Pulling an image through the Docker Engine API, with the engine's error turned into an
 * ImagePullError that says which of the usual three things went wrong.
 *
 * Plain-HTTP registries: Docker's `POST /images/create` has no per-pull TLS switch (Docker itself
 * treats 127.0.0.0/8 as insecure and reads others from its daemon.json), and Podman's copy of that
 * endpoint ignores one. Podman's own endpoint `POST /libpod/images/pull` takes `tlsVerify=false`,
 * so on Podman an image from one of `insecureRegistries` is pulled through it.
 */
import type Dockerode from 'dockerode';
import { ImagePullError, type ImageSource } from '../driver.js';

/** The registry host of a reference (`docker.io` when it names none). */
export function registryOf(reference: string): string {
  const first = reference.split('/')[0]!;
  const isHost = reference.includes('/') && (first.includes('.') || first.includes(':') || first === 'localhost');
  return isHost ? first : 'docker.io';
}

/** `name:tag` → `name:tag`; `name` → `name:latest` (the engine would pull every tag otherwise). */
export function withTag(reference: string): string {
  if (reference.includes('@')) return reference;
  const lastPart = reference.slice(reference.lastIndexOf('/') + 1);
  return lastPart.includes(':') ? reference : `${reference}:latest`;
}

interface PullEvent {
  error?: string;
  errorDetail?: { message?: string };
}

export async function pullImage(docker: Dockerode, image: ImageSource, engineIsPodman: boolean): Promise<void> {
  const reference = withTag(image.reference);
  const registry = registryOf(reference);
  const insecure = (image.insecureRegistries ?? []).includes(registry);
  const authconfig = image.credentials && {
    username: image.credentials.username,
    password: image.credentials.password,
    serveraddress: image.credentials.server,
  };
  let failure: string | undefined;
  try {
    const stream: NodeJS.ReadableStream =
      insecure && engineIsPodman
        ? await new Promise<NodeJS.ReadableStream>((resolve, reject) =>
            docker.modem.dial(
              {
                // Podman serves its own API under a version prefix only (v4.0.0 is its oldest).
                path: '/v4.0.0/libpod/images/pull?',
                method: 'POST',
                options: { reference, tlsVerify: false },
                authconfig,
                isStream: true,
                statusCodes: { 200: true, 400: 'bad parameter', 500: 'server error' },
              },
              (error, stream) => (error ? reject(error) : resolve(stream as NodeJS.ReadableStream)),
            ),
          )
        : await docker.pull(reference, authconfig ? { authconfig } : {});
    // The engine answers 200 and then reports a failed pull inside the progress stream.
    await new Promise<void>((resolve, reject) => {
      docker.modem.followProgress(
        stream,
        (error: Error | null) => (error ? reject(error) : resolve()),
        (event: PullEvent) => {
          failure ??= event.errorDetail?.message ?? event.error;
        },
      );
    });
  } catch (error) {
    throw pullError(image, registry, insecure, errorText(error), error);
  }
  if (failure) throw pullError(image, registry, insecure, failure);
}

function errorText(error: unknown): string {
  const json = (error as { json?: { message?: string } }).json;
  return json?.message ?? (error instanceof Error ? error.message : String(error));
}

/** One of: no such image, access refused, registry unreachable — or the engine's words. */
function pullError(image: ImageSource, registry: string, insecure: boolean, text: string, cause?: unknown): ImagePullError {
  const ref = image.reference;
  const options = { cause: cause ?? new Error(text) };
  if (/manifest unknown|name unknown|not found|does not exist|no such image/i.test(text)) {
    return new ImagePullError(`image ${ref} does not exist in registry ${registry}`, options);
  }
  if (/unauthorized|authentication required|denied|forbidden|401|403/i.test(text)) {
    const how = image.credentials ? 'the registry credentials were refused' : 'the registry needs credentials and none are set';
    return new ImagePullError(`cannot pull ${ref}: ${how} (registry ${registry})`, options);
  }
  if (/server gave HTTP response to HTTPS client/i.test(text)) {
    const fix = insecure
      ? "this engine pulls over TLS only: add the registry to its insecure registries (Docker: daemon.json's insecure-registries)"
      : "add it to the image's insecure registries";
    return new ImagePullError(`cannot pull ${ref}: registry ${registry} serves plain HTTP; ${fix}`, options);
  }
  if (/connection refused|no such host|i\/o timeout|network is unreachable|timeout|dial tcp|EOF|TLS handshake/i.test(text)) {
    return new ImagePullError(`cannot pull ${ref}: registry ${registry} is unreachable (${lastClause(text)})`, options);
  }
  return new ImagePullError(`cannot pull ${ref}: ${text}`, options);
}

/** `initializing source …: pinging …: Get …: dial tcp …: connect: connection refused` → the cause. */
function lastClause(text: string): string {
  const parts = text.split(': ');
  return parts.slice(-2).join(': ');
}
