/**
 * Sandboxes (`/boxes`, addressed by name) as the `langsmith/sandbox` client drives them: create
 * (from a snapshot by id or name, or a Berth template), optionally waiting until ready; status,
 * stop and start; list; delete. Each carries its `dataplane_url`, built from the platform's public
 * URL and the sandbox's id, so it stays the same across stop/start and renames.
 */
import { DeadlineExceededError } from '@berth/errors';
import { SandboxStatus, type CreateSandboxRequest, type Sandbox } from '@berth/proto';
import type { Request } from 'express';
import { publicOrigin } from '../../public-url.js';
import { boxJson, boxStatuses, proxyConfigMessage, runConfigMessage } from './convert.js';
import { answerTyped } from './errors.js';
import type { SandboxRouteDeps } from './index.js';
import { BoxOut, BoxStatusOut, CreateBoxBody, EmptyBody, ListBoxesOut, ListBoxesQuery, NamePath, UpdateBoxBody } from './schemas.js';
import { found, nextCursor } from './templates.js';
import type { GatewayApi } from '../../access.js';

/** Time the manager gets beyond the caller's `timeout` to answer (its own deadline fires first). */
const WAIT_MARGIN_MS = 10_000;

/**
 * The typed error of a sandbox that failed to start: `ImagePullError` when its status message
 * is about getting the image (the manager words those with "pull", "image", "manifest" or
 * "registry"), else `SandboxFailed`. The client shows the type and the message.
 */
export function failureType(statusMessage: string): 'ImagePullError' | 'SandboxFailed' {
  return /\b(pull(ing|ed)?|image|manifest|registry)\b/i.test(statusMessage) ? 'ImagePullError' : 'SandboxFailed';
}

type Source = CreateSandboxRequest['source'];

function sourceOf(body: { snapshot_id?: string | undefined; snapshot_name?: string | undefined; template_name?: string | undefined }): Source {
  if (body.snapshot_id !== undefined) return { case: 'snapshotId', value: body.snapshot_id };
  if (body.snapshot_name !== undefined) return { case: 'snapshotName', value: body.snapshot_name };
  if (body.template_name !== undefined) return { case: 'templateName', value: body.template_name };
  return { case: undefined };
}

const bigint = (n: number | undefined) => (n === undefined ? undefined : BigInt(n));

export function boxRoutes(api: GatewayApi, deps: SandboxRouteDeps): void {
  const rpc = () => deps.manager.sandboxes;
  const tags = ['sandboxes'];
  const dataplaneBase = (req: Request) => `${publicOrigin(req, deps.publicUrl)}/api/v2/sandboxes/dataplane`;
  const json = (req: Request, sandbox: Sandbox | undefined) => boxJson(found(sandbox, 'Sandbox'), dataplaneBase(req));
  const ref = (tenantId: string, name: string) => ({ tenantId, name });

  api
    .route({
      method: 'post',
      path: '/api/v2/sandboxes/boxes',
      access: ['api_key', 'access_token', 'session'],
      summary: 'Create a sandbox',
      description:
        'From `snapshot_id`, `snapshot_name` (`name` or `name:tag`) or `template_name` (a Berth template; served from its warm ' +
        'pool when one is ready). With `wait_for_ready` (default) the answer comes once it is ready: 408 `{"detail": {"error": ' +
        '"Timeout"}}` when it is not within `timeout` seconds (it keeps starting; poll /status), 422 `{"detail": {"error": ' +
        '"ImagePullError" | "SandboxFailed", "message": <why>}}` when it failed. Without, it answers at once with status ' +
        '`provisioning`. TTLs are 0 (never) or multiples of 60 seconds: `idle_ttl_seconds` stops it after that long without ' +
        'commands or file calls, `delete_after_stop_seconds` deletes it that long after it stopped, `ttl_seconds` deletes it ' +
        'that long after creation. 409: the name is taken. `vcpus`, `mem_bytes`, `fs_capacity_bytes` not given come from the ' +
        "template or snapshot, else the operator's defaults (the answer shows what it got); above the operator's maximum: 422 " +
        "naming the field and the maximum. Beyond the tenant's quota (sandboxes, memory, CPU): 429. While the sandbox engine " +
        'is down: 503 with Retry-After.',
      tags,
      body: CreateBoxBody,
      status: 201,
      response: BoxOut,
      errors: [404, 408, 409, 422, 429, 503],
      handler: async ({ body, auth, req, res }) => {
        const waitMs = body.timeout * 1000 + WAIT_MARGIN_MS;
        let sandbox: Sandbox;
        try {
          const answer = await rpc().createSandbox(
            {
              tenantId: auth.tenantId,
              ...(body.name !== undefined ? { name: body.name } : {}),
              source: sourceOf(body),
              ...(body.vcpus !== undefined ? { vcpus: body.vcpus } : {}),
              memBytes: bigint(body.mem_bytes),
              fsCapacityBytes: bigint(body.fs_capacity_bytes),
              idleTtlSeconds: bigint(body.idle_ttl_seconds),
              deleteAfterStopSeconds: bigint(body.delete_after_stop_seconds),
              ttlSeconds: bigint(body.ttl_seconds),
              labels: body.labels ?? {},
              ...(body.proxy_config ? { proxyConfig: proxyConfigMessage(body.proxy_config) } : {}),
              ...(body.run_config ? { runConfig: runConfigMessage(body.run_config) } : {}),
              waitForReady: body.wait_for_ready,
              timeoutSeconds: body.timeout,
            },
            body.wait_for_ready ? { timeoutMs: waitMs } : {},
          );
          sandbox = found(answer.sandbox, 'Sandbox');
        } catch (error) {
          if (body.wait_for_ready && error instanceof DeadlineExceededError) {
            return answerTyped(
              res,
              408,
              'Timeout',
              `The sandbox was not ready within ${body.timeout} seconds; it keeps starting (poll GET /api/v2/sandboxes/boxes/{name}/status)`,
            );
          }
          throw error;
        }
        if (body.wait_for_ready && sandbox.status === SandboxStatus.FAILED) {
          const message = sandbox.statusMessage || 'The sandbox failed to start';
          return answerTyped(res, 422, failureType(message), message, { sandbox_name: sandbox.name });
        }
        return json(req, sandbox);
      },
    })
    .route({
      method: 'get',
      path: '/api/v2/sandboxes/boxes',
      access: ['api_key', 'access_token', 'session'],
      summary: 'List sandboxes, newest first',
      description: '`sandboxes` and `items` hold the same page; pass `next_cursor` back as `cursor` (or use `offset`) for the next one.',
      tags,
      query: ListBoxesQuery,
      response: ListBoxesOut,
      errors: [503],
      handler: async ({ query, auth, req }) => {
        const offset = query.cursor !== undefined ? Number(query.cursor) : query.offset;
        const answer = await rpc().listSandboxes({ tenantId: auth.tenantId, limit: query.limit, offset });
        const sandboxes = answer.sandboxes.map((s) => json(req, s));
        return { sandboxes, items: sandboxes, next_cursor: nextCursor(answer.hasMore, offset, sandboxes.length), offset };
      },
    })
    .route({
      method: 'get',
      path: '/api/v2/sandboxes/boxes/{name}',
      access: ['api_key', 'access_token', 'session'],
      summary: 'Get a sandbox',
      tags,
      params: NamePath,
      response: BoxOut,
      errors: [404, 503],
      handler: async ({ params, auth, req }) => json(req, (await rpc().getSandbox({ ref: ref(auth.tenantId, params.name) })).sandbox),
    })
    .route({
      method: 'patch',
      path: '/api/v2/sandboxes/boxes/{name}',
      access: ['api_key', 'access_token', 'session'],
      summary: 'Rename a sandbox or change its TTLs and labels',
      description: 'Its `dataplane_url` stays the same. 409: the new name is taken.',
      tags,
      params: NamePath,
      body: UpdateBoxBody,
      response: BoxOut,
      errors: [404, 409, 503],
      handler: async ({ params, body, auth, req }) => {
        const answer = await rpc().updateSandbox({
          ref: ref(auth.tenantId, params.name),
          ...(body.name !== undefined ? { name: body.name } : {}),
          idleTtlSeconds: bigint(body.idle_ttl_seconds),
          deleteAfterStopSeconds: bigint(body.delete_after_stop_seconds),
          labels: body.labels ?? {},
          labelsSet: body.labels !== undefined,
        });
        return json(req, answer.sandbox);
      },
    })
    .route({
      method: 'delete',
      path: '/api/v2/sandboxes/boxes/{name}',
      access: ['api_key', 'access_token', 'session'],
      summary: 'Delete a sandbox and its files',
      description: 'Taken even while the sandbox engine is down: the sandbox is gone at once, its container once the engine answers again.',
      tags,
      params: NamePath,
      errors: [404, 503],
      handler: async ({ params, auth }) => {
        await rpc().deleteSandbox({ ref: ref(auth.tenantId, params.name) });
      },
    })
    .route({
      method: 'get',
      path: '/api/v2/sandboxes/boxes/{name}/status',
      access: ['api_key', 'access_token', 'session'],
      summary: 'The status of a sandbox',
      description: '`provisioning`, `ready`, `failed` (status_message says why: image pull, out of memory, …) or `stopped`.',
      tags,
      params: NamePath,
      response: BoxStatusOut,
      errors: [404, 503],
      handler: async ({ params, auth }) => {
        const sandbox = found((await rpc().getSandbox({ ref: ref(auth.tenantId, params.name) })).sandbox, 'Sandbox');
        return { status: boxStatuses[sandbox.status] ?? 'provisioning', status_message: sandbox.statusMessage || null };
      },
    })
    .route({
      method: 'post',
      path: '/api/v2/sandboxes/boxes/{name}/stop',
      access: ['api_key', 'access_token', 'session'],
      summary: 'Stop a sandbox (its files are kept)',
      description: 'Commands end; `start`, or any data-plane call, resumes it with its files and TTLs.',
      tags,
      params: NamePath,
      body: EmptyBody,
      response: BoxOut,
      errors: [404, 409, 503],
      handler: async ({ params, auth, req }) => json(req, (await rpc().stopSandbox({ ref: ref(auth.tenantId, params.name) })).sandbox),
    })
    .route({
      method: 'post',
      path: '/api/v2/sandboxes/boxes/{name}/start',
      access: ['api_key', 'access_token', 'session'],
      summary: 'Start a stopped (or failed) sandbox',
      description:
        "Answers at once; poll /status until `ready`. Its files, TTLs and dataplane_url are kept. 429: its memory or CPU would go beyond the tenant's quota.",
      tags,
      params: NamePath,
      body: EmptyBody,
      response: BoxOut,
      errors: [404, 409, 429, 503],
      handler: async ({ params, auth, req }) => json(req, (await rpc().startSandbox({ ref: ref(auth.tenantId, params.name) })).sandbox),
    });
}
