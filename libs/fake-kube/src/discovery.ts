/**
 * Discovery as clients read it: `/version`, `/api`, `/apis`, each group version's resource list,
 * and OpenAPI v3 (`/openapi/v3` and one document per group version). kubectl and helm download
 * OpenAPI to learn whether the server validates fields itself (a `fieldValidation` parameter on each
 * kind's PATCH operation); it does, so they send manifests without client-side validation. The
 * schemas only name each kind and accept any field: the fake validates what it stores itself
 * (resources.ts) and answers with the API server's own `Invalid` errors.
 */
import { createHash } from 'node:crypto';
import type { ObjectStore } from './store.js';
import { apiVersionOf, type ResourceType } from './types.js';

const VERBS = ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update'];

interface GroupVersion {
  group: string;
  version: string;
}

/** `api/v1` or `apis/{group}/{version}`: the path of a group version, as OpenAPI v3 names it. */
function pathOf(gv: GroupVersion): string {
  return gv.group ? `apis/${gv.group}/${gv.version}` : `api/${gv.version}`;
}

function groupVersions(types: ResourceType[]): GroupVersion[] {
  const seen = new Map<string, GroupVersion>();
  for (const t of types) seen.set(pathOf(t), { group: t.group, version: t.version });
  return [...seen.values()];
}

function resourceList(gv: GroupVersion, served: ResourceType[]): unknown {
  const resources = served.flatMap((t) => [
    { name: t.resource, singularName: t.singular, namespaced: t.namespaced, kind: t.kind, verbs: VERBS, ...(t.shortNames ? { shortNames: t.shortNames } : {}) },
    ...(t.statusSubresource
      ? [{ name: `${t.resource}/status`, singularName: '', namespaced: t.namespaced, kind: t.kind, verbs: ['get', 'patch', 'update'] }]
      : []),
    ...(t.group === '' && t.resource === 'pods'
      ? [
          { name: 'pods/log', singularName: '', namespaced: true, kind: 'Pod', verbs: ['get'] },
          { name: 'pods/exec', singularName: '', namespaced: true, kind: 'PodExecOptions', verbs: ['create', 'get'] },
        ]
      : []),
  ]);
  return { kind: 'APIResourceList', apiVersion: 'v1', groupVersion: apiVersionOf(gv), resources };
}

/** The OpenAPI v3 document of one group version: a schema per kind, open to any field. */
function openApiDocument(gv: GroupVersion, served: ResourceType[]): unknown {
  const schemas: Record<string, unknown> = {};
  for (const t of served) {
    const prefix = t.group ? `io.k8s.api.${t.group.split('.')[0]}` : 'io.k8s.api.core';
    schemas[`${prefix}.${t.version}.${t.kind}`] = {
      type: 'object',
      description: `${t.kind} (fake-kube: validated by the server, not by this schema)`,
      'x-kubernetes-preserve-unknown-fields': true,
      'x-kubernetes-group-version-kind': [{ group: t.group, version: t.version, kind: t.kind }],
    };
  }
  // kubectl and helm look for the PATCH operation of a kind with a `fieldValidation` parameter:
  // when the server has one, they leave validation to it instead of validating against schemas.
  const paths: Record<string, unknown> = {};
  for (const t of served) {
    const path = `/${pathOf(t)}${t.namespaced ? '/namespaces/{namespace}' : ''}/${t.resource}/{name}`;
    const patch = {
      'x-kubernetes-group-version-kind': { group: t.group, version: t.version, kind: t.kind },
      'x-kubernetes-action': 'patch',
      parameters: ['dryRun', 'fieldManager', 'fieldValidation', 'force'].map((name) => ({
        name,
        in: 'query',
        schema: { type: name === 'force' ? 'boolean' : 'string' },
      })),
    };
    paths[path] = { patch };
  }
  return { openapi: '3.0.0', info: { title: 'Kubernetes', version: 'v1.30.0-fake-kube' }, paths, components: { schemas } };
}

function hashOf(document: unknown): string {
  return createHash('sha512').update(JSON.stringify(document)).digest('hex').slice(0, 128).toUpperCase();
}

/** The discovery document at `segments` (the path split on `/`), or undefined when it is not a discovery path. */
export function discoveryDocument(store: ObjectStore, serverAddress: string, segments: string[]): unknown {
  const types = store.types();
  const path = segments.join('/');
  if (path === 'version') return { major: '1', minor: '30', gitVersion: 'v1.30.0-fake-kube', platform: 'linux/amd64' };
  if (path === 'api') return { kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress }] };
  if (path === 'apis') {
    const groups = [...new Set(types.filter((t) => t.group).map((t) => t.group))].map((name) => {
      const versions = [...new Set(types.filter((t) => t.group === name).map((t) => t.version))].map((version) => ({
        groupVersion: `${name}/${version}`,
        version,
      }));
      return { name, versions, preferredVersion: versions[0] };
    });
    return { kind: 'APIGroupList', apiVersion: 'v1', groups };
  }
  if (path === 'openapi/v3') {
    const paths = Object.fromEntries(
      groupVersions(types).map((gv) => {
        const document = openApiDocument(
          gv,
          types.filter((t) => pathOf(t) === pathOf(gv)),
        );
        return [pathOf(gv), { serverRelativeURL: `/openapi/v3/${pathOf(gv)}?hash=${hashOf(document)}` }];
      }),
    );
    return { paths };
  }
  const openapi = segments[0] === 'openapi' && segments[1] === 'v3';
  const rest = openapi ? segments.slice(2) : segments;
  const gv =
    rest[0] === 'api' && rest.length === 2
      ? { group: '', version: rest[1]! }
      : rest[0] === 'apis' && rest.length === 3
        ? { group: rest[1]!, version: rest[2]! }
        : undefined;
  if (!gv) return undefined;
  const served = types.filter((t) => t.group === gv.group && t.version === gv.version);
  if (served.length === 0) return undefined;
  return openapi ? openApiDocument(gv, served) : resourceList(gv, served);
}
