/**
 * Templates (interface text C1, addressed by name) and snapshots (what the `langsmith/sandbox`
 * client creates, addressed by id): the same thing in the sandbox-manager, an image with
 * resources, volumes and proxy rules, pulled once and then `ready` (or `failed`, saying why).
 */
import { NotFoundError, RequestValidationError } from '@berth/errors';
import { pathUuid } from '../../path-ids.js';
import { TemplateKind, type Template } from '@berth/proto';
import { z } from 'zod';
import { proxyConfigMessage, runConfigMessage, snapshotJson, templateJson } from './convert.js';
import type { SandboxRouteDeps } from './index.js';
import {
  CreateSnapshotBody,
  CreateTemplateBody,
  ListSnapshotsQuery,
  ListTemplatesQuery,
  SnapshotOut,
  SnapshotPath,
  TemplateOut,
  TemplatePath,
  UpdateTemplateBody,
} from './schemas.js';
import type { GatewayApi } from '../../access.js';

/** A UUID from a path (snapshot and sandbox ids): anything else names nothing, a 404 that never reaches the manager. */
export function pathId(id: string, what: string): string {
  return pathUuid(id, `${what} ${id} not found`);
}

export function found<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new NotFoundError(`${what} not found`);
  return value;
}

/** The next page's cursor (an offset), or null on the last page. */
export function nextCursor(hasMore: boolean, offset: number, count: number): string | null {
  return hasMore ? String(offset + count) : null;
}

export function templateRoutes(api: GatewayApi, deps: SandboxRouteDeps): void {
  const rpc = () => deps.manager.sandboxes;
  const tags = ['sandboxes'];
  const templateRef = (tenantId: string, name: string) => ({ tenantId, kind: TemplateKind.TEMPLATE, name });
  const snapshotRef = (tenantId: string, id: string) => ({ tenantId, kind: TemplateKind.SNAPSHOT, id: pathId(id, 'Snapshot') });

  /** The id of the tenant's registry `name`; an unknown one is a 422 on the field. */
  const registryId = async (tenantId: string, name: string): Promise<string> => {
    try {
      return found((await rpc().getRegistry({ tenantId, name })).registry, 'Registry').id;
    } catch (error) {
      if (error instanceof NotFoundError) {
        throw new RequestValidationError(
          [{ loc: ['body', 'registry_name'], msg: `No registry named ${name} (create it with POST /api/v2/sandboxes/registries)`, type: 'value_error' }],
          { cause: error },
        );
      }
      throw error;
    }
  };
  /** Templates store their registry's id; answers name it. One listing for any number of templates. */
  const withRegistryNames = async (tenantId: string, templates: Template[]) => {
    const names = new Map<string, string>();
    if (templates.some((t) => t.registryId)) {
      for (const r of (await rpc().listRegistries({ tenantId })).registries) names.set(r.id, r.name);
    }
    return templates.map((t) => templateJson(t, names));
  };
  const oneTemplate = async (tenantId: string, template: Template | undefined) => (await withRegistryNames(tenantId, [found(template, 'Template')]))[0]!;

  api
    .route({
      method: 'post',
      path: '/api/v2/sandboxes/templates',
      access: ['api_key', 'access_token', 'session'],
      summary: 'Create a sandbox template',
      description:
        'An image (any registry; a private one with `registry_name`), optional `resources` as Kubernetes quantities ' +
        '(`{"cpu": "500m", "memory": "512Mi", "storage": "2Gi"}`), named `volumes` with absolute mount paths, and ' +
        '`proxy_config` rules whose headers the auth proxy adds to matching outbound requests (opaque values are stored ' +
        'encrypted and never returned). The image is pulled in the background: `status` is `building`, then `ready` or ' +
        '`failed` with `status_message`. 409: the name is taken.',
      tags,
      body: CreateTemplateBody,
      status: 201,
      response: TemplateOut,
      errors: [409, 503],
      handler: async ({ body, auth }) => {
        const registry = body.registry_name ? await registryId(auth.tenantId, body.registry_name) : undefined;
        const answer = await rpc().createTemplate({
          tenantId: auth.tenantId,
          kind: TemplateKind.TEMPLATE,
          name: body.name,
          image: body.image,
          ...(body.resources ? { resources: body.resources } : {}),
          volumes: (body.volumes ?? []).map((v) => ({ volumeName: v.volume_name, mountPath: v.mount_path })),
          ...(body.proxy_config ? { proxyConfig: proxyConfigMessage(body.proxy_config) } : {}),
          ...(registry ? { registryId: registry } : {}),
        });
        const template = found(answer.template, 'Template');
        return templateJson(template, new Map(registry && body.registry_name ? [[registry, body.registry_name]] : []));
      },
    })
    .route({
      method: 'get',
      path: '/api/v2/sandboxes/templates',
      access: ['api_key', 'access_token', 'session'],
      summary: 'List sandbox templates',
      tags,
      query: ListTemplatesQuery,
      response: z.object({ templates: z.array(TemplateOut) }),
      errors: [503],
      handler: async ({ query, auth }) => {
        const answer = await rpc().listTemplates({
          tenantId: auth.tenantId,
          kind: TemplateKind.TEMPLATE,
          limit: query.limit,
          offset: query.offset,
          ...(query.name_contains ? { nameContains: query.name_contains } : {}),
        });
        return { templates: await withRegistryNames(auth.tenantId, answer.templates) };
      },
    })
    .route({
      method: 'get',
      path: '/api/v2/sandboxes/templates/{name}',
      access: ['api_key', 'access_token', 'session'],
      summary: 'Get a sandbox template',
      tags,
      params: TemplatePath,
      response: TemplateOut,
      errors: [404, 503],
      handler: async ({ params, auth }) => oneTemplate(auth.tenantId, (await rpc().getTemplate({ ref: templateRef(auth.tenantId, params.name) })).template),
    })
    .route({
      method: 'patch',
      path: '/api/v2/sandboxes/templates/{name}',
      access: ['api_key', 'access_token', 'session'],
      summary: 'Change a sandbox template',
      description:
        'Only the fields given change (`volumes` replaces the list; `registry_name: null` pulls without credentials). A new ' +
        'image is pulled again. Warm-pool members of the old version are replaced, never handed out; running sandboxes keep theirs.',
      tags,
      params: TemplatePath,
      body: UpdateTemplateBody,
      response: TemplateOut,
      errors: [404, 503],
      handler: async ({ params, body, auth }) => {
        const registry = body.registry_name ? await registryId(auth.tenantId, body.registry_name) : undefined;
        const answer = await rpc().updateTemplate({
          ref: templateRef(auth.tenantId, params.name),
          ...(body.image !== undefined ? { image: body.image } : {}),
          ...(body.resources ? { resources: body.resources } : {}),
          volumesSet: body.volumes !== undefined,
          volumes: (body.volumes ?? []).map((v) => ({ volumeName: v.volume_name, mountPath: v.mount_path })),
          ...(body.proxy_config ? { proxyConfig: proxyConfigMessage(body.proxy_config) } : {}),
          ...(registry ? { registryId: registry } : {}),
          clearRegistry: body.registry_name === null,
        });
        return oneTemplate(auth.tenantId, answer.template);
      },
    })
    .route({
      method: 'delete',
      path: '/api/v2/sandboxes/templates/{name}',
      access: ['api_key', 'access_token', 'session'],
      summary: 'Delete a sandbox template',
      description: 'Refused (409) while a sandbox or a warm pool uses it.',
      tags,
      params: TemplatePath,
      errors: [404, 409, 503],
      handler: async ({ params, auth }) => {
        await rpc().deleteTemplate({ ref: templateRef(auth.tenantId, params.name) });
      },
    })
    .route({
      method: 'post',
      path: '/api/v2/sandboxes/snapshots',
      access: ['api_key', 'access_token', 'session'],
      summary: 'Create a snapshot (an image sandboxes start from)',
      description:
        'What `SandboxClient.createSnapshot` sends. The image is pulled in the background (`status` building, then ready or ' +
        'failed with status_message); poll GET /snapshots/{snapshot_id}. `registry_id` names a registry whose credentials pull it.',
      tags,
      body: CreateSnapshotBody,
      status: 201,
      response: SnapshotOut,
      errors: [409, 503],
      handler: async ({ body, auth }) => {
        const answer = await rpc().createTemplate({
          tenantId: auth.tenantId,
          kind: TemplateKind.SNAPSHOT,
          name: body.name,
          image: body.docker_image,
          resources: { storage: String(body.fs_capacity_bytes) },
          ...(body.registry_id ? { registryId: body.registry_id } : {}),
          ...(body.run_config ? { runConfig: runConfigMessage(body.run_config) } : {}),
        });
        return snapshotJson(found(answer.template, 'Snapshot'));
      },
    })
    .route({
      method: 'get',
      path: '/api/v2/sandboxes/snapshots',
      access: ['api_key', 'access_token', 'session'],
      summary: 'List snapshots, newest first',
      tags,
      query: ListSnapshotsQuery,
      response: z.object({
        snapshots: z.array(SnapshotOut),
        items: z.array(SnapshotOut).describe('The same as snapshots'),
        next_cursor: z.string().nullable(),
        offset: z.number(),
      }),
      errors: [503],
      handler: async ({ query, auth }) => {
        const answer = await rpc().listTemplates({
          tenantId: auth.tenantId,
          kind: TemplateKind.SNAPSHOT,
          limit: query.limit,
          offset: query.offset,
          ...(query.name_contains ? { nameContains: query.name_contains } : {}),
        });
        const snapshots = answer.templates.map(snapshotJson);
        return { snapshots, items: snapshots, next_cursor: nextCursor(answer.hasMore, query.offset, snapshots.length), offset: query.offset };
      },
    })
    .route({
      method: 'get',
      path: '/api/v2/sandboxes/snapshots/{snapshot_id}',
      access: ['api_key', 'access_token', 'session'],
      summary: 'Get a snapshot',
      tags,
      params: SnapshotPath,
      response: SnapshotOut,
      errors: [404, 503],
      handler: async ({ params, auth }) =>
        snapshotJson(found((await rpc().getTemplate({ ref: snapshotRef(auth.tenantId, params.snapshot_id) })).template, 'Snapshot')),
    })
    .route({
      method: 'delete',
      path: '/api/v2/sandboxes/snapshots/{snapshot_id}',
      access: ['api_key', 'access_token', 'session'],
      summary: 'Delete a snapshot',
      description: 'Refused (409) while a sandbox or a warm pool uses it.',
      tags,
      params: SnapshotPath,
      errors: [404, 409, 503],
      handler: async ({ params, auth }) => {
        await rpc().deleteTemplate({ ref: snapshotRef(auth.tenantId, params.snapshot_id) });
      },
    });
}
