/**
 * The gRPC handlers of `SandboxService` and `SandboxDataService`: requests to domain calls, rows to
 * messages. Every call is scoped to its tenant.
 */
import { InvalidArgumentError, NotFoundError } from '@berth/errors';
import { SandboxDataService, SandboxService, type TemplateRef as WireTemplateRef, type SandboxRef as WireSandboxRef } from '@berth/proto';
import type { ServiceImplementation } from '@berth/rpc';
import type { Registries } from '../catalog/registries.js';
import type { TemplateRef, Templates } from '../catalog/templates.js';
import type { Volumes } from '../catalog/volumes.js';
import { MAX_FILE_BYTES, type SandboxDriver } from '../drivers/driver.js';
import type { CommandSessions } from '../exec/sessions.js';
import type { Pools } from '../pools/pools.js';
import type { CreateSandboxInput, Sandboxes } from '../sandboxes/sandboxes.js';
import type { SandboxRef, SandboxRow } from '../sandboxes/store.js';
import { kindOf, poolMessage, registryMessage, sandboxMessage, templateMessage, volumeMessage } from './messages.js';

export interface HandlerDeps {
  templates: Templates;
  registries: Registries;
  volumes: Volumes;
  pools: Pools;
  sandboxes: Sandboxes;
  sessions: CommandSessions;
  driver: SandboxDriver;
}

const READ_CHUNK = 1024 * 1024;

function templateRef(ref: WireTemplateRef | undefined): TemplateRef {
  if (!ref) throw new NotFoundError('template not found');
  const base = { tenantId: ref.tenantId, kind: kindOf(ref.kind) };
  return ref.id !== undefined ? { ...base, id: ref.id } : { ...base, name: ref.name ?? '' };
}

function sandboxRef(ref: WireSandboxRef | undefined): SandboxRef {
  if (!ref) throw new NotFoundError('sandbox not found');
  return ref.id !== undefined ? { tenantId: ref.tenantId, id: ref.id } : { tenantId: ref.tenantId, name: ref.name ?? '' };
}

const page = (limit: number, offset: number) => ({ limit: limit > 0 ? Math.min(limit, 500) : 50, offset: Math.max(0, offset) });

export function sandboxHandlers(deps: HandlerDeps): ServiceImplementation<typeof SandboxService> {
  const { templates, registries, volumes, pools, sandboxes } = deps;
  const sandboxOut = async (row: SandboxRow) => ({ sandbox: sandboxMessage(row, row.template_id ? await templates.byId(row.template_id) : undefined) });
  return {
    async createTemplate(request) {
      await sandboxes.assertAvailable();
      const row = await templates.create(request.tenantId, kindOf(request.kind), {
        name: request.name,
        image: request.image,
        ...(request.resources ? { resources: request.resources } : {}),
        volumes: request.volumes.map((v) => ({ volume_name: v.volumeName, mount_path: v.mountPath })),
        ...(request.proxyConfig ? { proxyConfig: request.proxyConfig } : {}),
        ...(request.registryId ? { registryId: request.registryId } : {}),
        ...(request.runConfig
          ? { runConfig: { ...(request.runConfig.workDir ? { work_dir: request.runConfig.workDir } : {}), env_vars: request.runConfig.envVars } }
          : {}),
      });
      return { template: templateMessage(row) };
    },
    async getTemplate(request) {
      return { template: templateMessage(await templates.get(templateRef(request.ref))) };
    },
    async listTemplates(request) {
      const { rows, hasMore } = await templates.list(request.tenantId, kindOf(request.kind), {
        ...(request.nameContains ? { nameContains: request.nameContains } : {}),
        ...page(request.limit, request.offset),
      });
      return { templates: rows.map(templateMessage), hasMore };
    },
    async updateTemplate(request) {
      // A new image is pulled.
      await sandboxes.assertAvailable();
      const row = await templates.update(templateRef(request.ref), {
        ...(request.image !== undefined ? { image: request.image } : {}),
        ...(request.resources ? { resources: request.resources } : {}),
        ...(request.volumesSet ? { volumes: request.volumes.map((v) => ({ volume_name: v.volumeName, mount_path: v.mountPath })) } : {}),
        ...(request.proxyConfig ? { proxyConfig: request.proxyConfig } : {}),
        ...(request.clearRegistry ? { registryId: null } : request.registryId !== undefined ? { registryId: request.registryId } : {}),
      });
      return { template: templateMessage(row) };
    },
    async deleteTemplate(request) {
      await templates.delete(templateRef(request.ref));
      return {};
    },

    async createRegistry(request) {
      return { registry: registryMessage(await registries.create(request.tenantId, request)) };
    },
    async listRegistries(request) {
      return { registries: (await registries.list(request.tenantId)).map(registryMessage) };
    },
    async getRegistry(request) {
      return { registry: registryMessage(await registries.get(request.tenantId, request.name)) };
    },
    async deleteRegistry(request) {
      await registries.delete(request.tenantId, request.name);
      return {};
    },

    async createVolume(request) {
      return { volume: volumeMessage(await volumes.create(request.tenantId, request.name, request.size)) };
    },
    async listVolumes(request) {
      return { volumes: (await volumes.list(request.tenantId)).map(volumeMessage) };
    },
    async getVolume(request) {
      return { volume: volumeMessage(await volumes.get(request.tenantId, request.name)) };
    },
    async deleteVolume(request) {
      await volumes.delete(request.tenantId, request.name);
      return {};
    },

    async createPool(request) {
      await sandboxes.assertAvailable();
      return { pool: poolMessage(await pools.create(request.tenantId, request.name, request.templateName, request.replicas)) };
    },
    async listPools(request) {
      return { pools: (await pools.list(request.tenantId)).map(poolMessage) };
    },
    async getPool(request) {
      return { pool: poolMessage(await pools.get(request.tenantId, request.name)) };
    },
    async updatePool(request) {
      const current = await pools.get(request.tenantId, request.name);
      return { pool: poolMessage(await pools.update(request.tenantId, request.name, request.replicas ?? current.replicas)) };
    },
    async deletePool(request) {
      await pools.delete(request.tenantId, request.name);
      return {};
    },

    async createSandbox(request, context) {
      const source: CreateSandboxInput['source'] =
        request.source.case === 'snapshotId'
          ? { snapshotId: request.source.value }
          : request.source.case === 'snapshotName'
            ? { snapshotName: request.source.value }
            : request.source.case === 'templateName'
              ? { templateName: request.source.value }
              : { default: true };
      let row = await sandboxes.create(request.tenantId, {
        ...(request.name !== undefined ? { name: request.name } : {}),
        source,
        ...(request.vcpus !== undefined ? { vcpus: request.vcpus } : {}),
        ...(request.memBytes !== undefined ? { memBytes: Number(request.memBytes) } : {}),
        ...(request.fsCapacityBytes !== undefined ? { fsCapacityBytes: Number(request.fsCapacityBytes) } : {}),
        ...(request.idleTtlSeconds !== undefined ? { idleTtlSeconds: Number(request.idleTtlSeconds) } : {}),
        ...(request.deleteAfterStopSeconds !== undefined ? { deleteAfterStopSeconds: Number(request.deleteAfterStopSeconds) } : {}),
        ...(request.ttlSeconds !== undefined ? { ttlSeconds: Number(request.ttlSeconds) } : {}),
        labels: request.labels,
        ...(request.proxyConfig ? { proxyConfig: request.proxyConfig } : {}),
        ...(request.runConfig
          ? { runConfig: { ...(request.runConfig.workDir ? { work_dir: request.runConfig.workDir } : {}), env_vars: request.runConfig.envVars } }
          : {}),
      });
      if (request.waitForReady) row = await sandboxes.waitSettled(row, (request.timeoutSeconds > 0 ? request.timeoutSeconds : 30) * 1000);
      void context;
      return sandboxOut(row);
    },
    async getSandbox(request) {
      return sandboxOut(await sandboxes.store.get(sandboxRef(request.ref)));
    },
    async listSandboxes(request) {
      const { rows, hasMore } = await sandboxes.store.list(request.tenantId, page(request.limit, request.offset));
      return { sandboxes: await Promise.all(rows.map(async (row) => (await sandboxOut(row)).sandbox)), hasMore };
    },
    async updateSandbox(request) {
      const row = await sandboxes.store.get(sandboxRef(request.ref));
      const updated = await sandboxes.store.update(row.id, {
        ...(request.name !== undefined ? { name: request.name } : {}),
        ...(request.idleTtlSeconds !== undefined ? { idle_ttl_seconds: String(request.idleTtlSeconds) } : {}),
        ...(request.deleteAfterStopSeconds !== undefined ? { delete_after_stop_seconds: String(request.deleteAfterStopSeconds) } : {}),
        ...(request.labelsSet ? { labels: JSON.stringify(request.labels) } : {}),
      });
      return sandboxOut(updated);
    },
    async deleteSandbox(request) {
      await sandboxes.delete(sandboxRef(request.ref));
      return {};
    },
    async stopSandbox(request) {
      return sandboxOut(await sandboxes.stop(sandboxRef(request.ref)));
    },
    async startSandbox(request) {
      return sandboxOut(await sandboxes.start(sandboxRef(request.ref)));
    },
  };
}

export function dataHandlers(deps: HandlerDeps): ServiceImplementation<typeof SandboxDataService> {
  const { sandboxes, sessions, driver } = deps;
  return {
    execute(requests) {
      return sessions.execute(requests, (first) => (first.kind.case === 'execute' || first.kind.case === 'reconnect' ? first.kind.value.tenantId : ''));
    },
    async writeFile(requests) {
      let header: { tenantId: string; sandboxId: string; path: string } | undefined;
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const chunk of requests) {
        header ??= { tenantId: chunk.tenantId, sandboxId: chunk.sandboxId, path: chunk.path };
        size += chunk.data.length;
        if (size > MAX_FILE_BYTES) throw new InvalidArgumentError(`a file written in one call is at most ${MAX_FILE_BYTES / 1024 / 1024} MiB`);
        chunks.push(Buffer.from(chunk.data));
      }
      if (!header) throw new InvalidArgumentError('no file was sent');
      const row = await sandboxes.ensureReady(header.tenantId, header.sandboxId);
      await driver.writeFile(row.instance, header.path, Buffer.concat(chunks));
      await sandboxes.store.touch(row.id, sandboxes.now());
      return {};
    },
    async *readFile(request) {
      const row = await sandboxes.ensureReady(request.tenantId, request.sandboxId);
      const data = await driver.readFile(row.instance, request.path);
      await sandboxes.store.touch(row.id, sandboxes.now());
      if (data.length === 0) yield { data: new Uint8Array() };
      for (let offset = 0; offset < data.length; offset += READ_CHUNK) yield { data: data.subarray(offset, offset + READ_CHUNK) };
    },
  };
}
