/**
 * What templates refer to by name: registries (pull credentials), named volumes, and warm pools
 * (ready sandboxes of a template kept in reserve). All addressed by name within the tenant.
 */
import { z } from 'zod';
import { poolJson, registryJson, volumeJson } from './convert.js';
import type { SandboxRouteDeps } from './index.js';
import { CreatePoolBody, CreateRegistryBody, CreateVolumeBody, NamePath, PoolOut, RegistryOut, UpdatePoolBody, VolumeOut } from './schemas.js';
import { found } from './templates.js';
import type { GatewayApi } from '../../access.js';

export function catalogRoutes(api: GatewayApi, deps: SandboxRouteDeps): void {
  const rpc = () => deps.manager.sandboxes;
  const tags = ['sandboxes'];

  api
    .route({
      method: 'post',
      path: '/api/v2/sandboxes/registries',
      access: ['api_key', 'access_token', 'session'],
      summary: 'Store pull credentials for a container registry',
      description:
        'Templates name it in `registry_name` (snapshots in `registry_id`). The password is stored encrypted and never returned. 409: the name is taken.',
      tags,
      body: CreateRegistryBody,
      status: 201,
      response: RegistryOut,
      errors: [409, 503],
      handler: async ({ body, auth }) => {
        const answer = await rpc().createRegistry({
          tenantId: auth.tenantId,
          name: body.name,
          server: body.server,
          username: body.username,
          password: body.password,
          insecure: body.insecure,
        });
        return registryJson(found(answer.registry, 'Registry'));
      },
    })
    .route({
      method: 'get',
      path: '/api/v2/sandboxes/registries',
      access: ['api_key', 'access_token', 'session'],
      summary: 'List registries',
      tags,
      response: z.object({ registries: z.array(RegistryOut) }),
      errors: [503],
      handler: async ({ auth }) => ({ registries: (await rpc().listRegistries({ tenantId: auth.tenantId })).registries.map(registryJson) }),
    })
    .route({
      method: 'get',
      path: '/api/v2/sandboxes/registries/{name}',
      access: ['api_key', 'access_token', 'session'],
      summary: 'Get a registry',
      tags,
      params: NamePath,
      response: RegistryOut,
      errors: [404, 503],
      handler: async ({ params, auth }) => registryJson(found((await rpc().getRegistry({ tenantId: auth.tenantId, name: params.name })).registry, 'Registry')),
    })
    .route({
      method: 'delete',
      path: '/api/v2/sandboxes/registries/{name}',
      access: ['api_key', 'access_token', 'session'],
      summary: 'Delete a registry',
      description: 'Refused (409) while a template pulls with it.',
      tags,
      params: NamePath,
      errors: [404, 409, 503],
      handler: async ({ params, auth }) => {
        await rpc().deleteRegistry({ tenantId: auth.tenantId, name: params.name });
      },
    })
    .route({
      method: 'post',
      path: '/api/v2/sandboxes/volumes',
      access: ['api_key', 'access_token', 'session'],
      summary: 'Create a named persistent volume',
      description:
        'Templates mount it with `volumes: [{volume_name, mount_path}]`; its files outlive the sandboxes. `size` is a quantity (`1Gi`). 409: the name is taken.',
      tags,
      body: CreateVolumeBody,
      status: 201,
      response: VolumeOut,
      errors: [409, 503],
      handler: async ({ body, auth }) =>
        volumeJson(found((await rpc().createVolume({ tenantId: auth.tenantId, name: body.name, size: body.size })).volume, 'Volume')),
    })
    .route({
      method: 'get',
      path: '/api/v2/sandboxes/volumes',
      access: ['api_key', 'access_token', 'session'],
      summary: 'List volumes',
      tags,
      response: z.object({ volumes: z.array(VolumeOut) }),
      errors: [503],
      handler: async ({ auth }) => ({ volumes: (await rpc().listVolumes({ tenantId: auth.tenantId })).volumes.map(volumeJson) }),
    })
    .route({
      method: 'get',
      path: '/api/v2/sandboxes/volumes/{name}',
      access: ['api_key', 'access_token', 'session'],
      summary: 'Get a volume',
      tags,
      params: NamePath,
      response: VolumeOut,
      errors: [404, 503],
      handler: async ({ params, auth }) => volumeJson(found((await rpc().getVolume({ tenantId: auth.tenantId, name: params.name })).volume, 'Volume')),
    })
    .route({
      method: 'delete',
      path: '/api/v2/sandboxes/volumes/{name}',
      access: ['api_key', 'access_token', 'session'],
      summary: 'Delete a volume and its files',
      description: 'Refused (409) while a template mounts it.',
      tags,
      params: NamePath,
      errors: [404, 409, 503],
      handler: async ({ params, auth }) => {
        await rpc().deleteVolume({ tenantId: auth.tenantId, name: params.name });
      },
    })
    .route({
      method: 'post',
      path: '/api/v2/sandboxes/pools',
      access: ['api_key', 'access_token', 'session'],
      summary: 'Keep ready sandboxes of a template in reserve (a warm pool)',
      description:
        'A sandbox created from `template_name` is then taken from the pool when one is ready, and the pool refills. A change of ' +
        'the template replaces members of the old version; they are never handed out. `replicas` 0 to 100. 409: the name is taken.',
      tags,
      body: CreatePoolBody,
      status: 201,
      response: PoolOut,
      errors: [404, 409, 503],
      handler: async ({ body, auth }) =>
        poolJson(
          found((await rpc().createPool({ tenantId: auth.tenantId, name: body.name, templateName: body.template_name, replicas: body.replicas })).pool, 'Pool'),
        ),
    })
    .route({
      method: 'get',
      path: '/api/v2/sandboxes/pools',
      access: ['api_key', 'access_token', 'session'],
      summary: 'List warm pools',
      tags,
      response: z.object({ pools: z.array(PoolOut) }),
      errors: [503],
      handler: async ({ auth }) => ({ pools: (await rpc().listPools({ tenantId: auth.tenantId })).pools.map(poolJson) }),
    })
    .route({
      method: 'get',
      path: '/api/v2/sandboxes/pools/{name}',
      access: ['api_key', 'access_token', 'session'],
      summary: 'Get a warm pool',
      tags,
      params: NamePath,
      response: PoolOut,
      errors: [404, 503],
      handler: async ({ params, auth }) => poolJson(found((await rpc().getPool({ tenantId: auth.tenantId, name: params.name })).pool, 'Pool')),
    })
    .route({
      method: 'patch',
      path: '/api/v2/sandboxes/pools/{name}',
      access: ['api_key', 'access_token', 'session'],
      summary: 'Resize a warm pool',
      tags,
      params: NamePath,
      body: UpdatePoolBody,
      response: PoolOut,
      errors: [404, 503],
      handler: async ({ params, body, auth }) =>
        poolJson(found((await rpc().updatePool({ tenantId: auth.tenantId, name: params.name, replicas: body.replicas })).pool, 'Pool')),
    })
    .route({
      method: 'delete',
      path: '/api/v2/sandboxes/pools/{name}',
      access: ['api_key', 'access_token', 'session'],
      summary: 'Delete a warm pool and its idle members',
      tags,
      params: NamePath,
      errors: [404, 503],
      handler: async ({ params, auth }) => {
        await rpc().deletePool({ tenantId: auth.tenantId, name: params.name });
      },
    });
}
