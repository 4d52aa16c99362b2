/**
 * The resources the fake serves out of the box, with the server-side defaulting and validation
 * that clients rely on (names, labels, Secret `stringData`, Service cluster IPs, Deployment
 * selectors, PersistentVolumeClaims bound at once, NetworkPolicy CIDRs). Further resources can be
 * registered on the store.
 */
import { clusterAppResources } from './resources-cluster-apps.js';
import { record, type FieldError, type KubeObject, type ResourceType } from './types.js';

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const DNS1035_LABEL = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;
const QUALIFIED_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
const SECRET_KEY = /^[-._a-zA-Z0-9]+$/;
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

export type NameRule = 'dns1123-subdomain' | 'dns1123-label' | 'dns1035-label';

/** Why `name` breaks `rule`, or undefined when it is valid. */
export function nameError(name: string, rule: NameRule): string | undefined {
  if (rule === 'dns1123-subdomain') {
    if (name.length > 253) return 'must be no more than 253 characters';
    if (!DNS1123_SUBDOMAIN.test(name)) {
      return "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
    }
    return undefined;
  }
  if (name.length > 63) return 'must be no more than 63 characters';
  if (rule === 'dns1123-label' && !DNS1123_LABEL.test(name)) {
    return "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
  }
  if (rule === 'dns1035-label' && !DNS1035_LABEL.test(name)) {
    return "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character";
  }
  return undefined;
}

/** Errors in a label or annotation key (`prefix/name`). */
function keyError(key: string): string | undefined {
  const slash = key.lastIndexOf('/');
  const prefix = slash >= 0 ? key.slice(0, slash) : undefined;
  const name = slash >= 0 ? key.slice(slash + 1) : key;
  if (prefix !== undefined && nameError(prefix, 'dns1123-subdomain')) return `prefix of "${key}" must be a DNS subdomain`;
  if (name.length === 0 || name.length > 63 || !QUALIFIED_NAME.test(name)) {
    return `name part of "${key}" must be 63 characters or less, alphanumeric, '-', '_' or '.', starting and ending with an alphanumeric character`;
  }
  return undefined;
}

/** Field errors of `metadata.labels` (keys and values) and of annotation keys. */
export function metadataErrors(object: KubeObject): FieldError[] {
  const errors: FieldError[] = [];
  for (const [key, value] of Object.entries(object.metadata.labels ?? {})) {
    const k = keyError(key);
    if (k) errors.push({ field: 'metadata.labels', message: k });
    if (typeof value !== 'string' || value.length > 63 || !LABEL_VALUE.test(value)) {
      errors.push({
        field: `metadata.labels.${key}`,
        message: `Invalid value: "${String(value)}": a valid label must be an empty string or 63 characters or less, alphanumeric, '-', '_' or '.'`,
      });
    }
  }
  for (const key of Object.keys(object.metadata.annotations ?? {})) {
    const k = keyError(key);
    if (k) errors.push({ field: 'metadata.annotations', message: k });
  }
  return errors;
}

/** Which naming rule a resource's object names follow. */
export function nameRuleOf(type: ResourceType): NameRule {
  if (type.group === '' && (type.resource === 'services' || type.resource === 'namespaces')) {
    return type.resource === 'services' ? 'dns1035-label' : 'dns1123-label';
  }
  return 'dns1123-subdomain';
}

type Obj = Record<string, unknown>;

/** An IPv4 or IPv6 CIDR, checked by shape (the fake needs no more). */
const CIDR = /^(?:\d{1,3}(?:\.\d{1,3}){3}\/\d{1,2}|[0-9a-fA-F:]+\/\d{1,3})$/;

const secrets: ResourceType = {
  group: '',
  version: 'v1',
  resource: 'secrets',
  singular: 'secret',
  kind: 'Secret',
  namespaced: true,
  normalize(object) {
    // The API server folds write-only `stringData` into base64 `data`.
    const stringData = record(object['stringData']);
    if (Object.keys(stringData).length > 0) {
      const data = { ...record(object['data']) };
      for (const [key, value] of Object.entries(stringData)) data[key] = Buffer.from(String(value), 'utf8').toString('base64');
      object['data'] = data;
    }
    delete object['stringData'];
    object['type'] ??= 'Opaque';
  },
  validate(object) {
    const errors: FieldError[] = [];
    for (const [key, value] of Object.entries(record(object['data']))) {
      if (!SECRET_KEY.test(key)) errors.push({ field: `data[${key}]`, message: "a valid config key must consist of alphanumeric characters, '-', '_' or '.'" });
      if (typeof value !== 'string' || !BASE64.test(value)) errors.push({ field: `data[${key}]`, message: 'must be base64 encoded' });
    }
    return errors;
  },
};

const configmaps: ResourceType = {
  group: '',
  version: 'v1',
  resource: 'configmaps',
  singular: 'configmap',
  kind: 'ConfigMap',
  namespaced: true,
  shortNames: ['cm'],
};

let nextClusterIp = 1;

const services: ResourceType = {
  group: '',
  version: 'v1',
  resource: 'services',
  singular: 'service',
  kind: 'Service',
  namespaced: true,
  shortNames: ['svc'],
  statusSubresource: true,
  normalize(object) {
    const spec = record(object['spec']);
    spec['type'] ??= 'ClusterIP';
    if (spec['type'] === 'ClusterIP' && spec['clusterIP'] === undefined) {
      const n = nextClusterIp++;
      spec['clusterIP'] = `10.96.${Math.floor(n / 250) % 250}.${(n % 250) + 1}`;
      spec['clusterIPs'] = [spec['clusterIP']];
    }
    if (Array.isArray(spec['ports'])) {
      for (const port of spec['ports'] as Array<Record<string, unknown>>) {
        port['protocol'] ??= 'TCP';
        port['targetPort'] ??= port['port'];
      }
    }
    object['spec'] = spec;
  },
  validate(object, previous) {
    const spec = record(object['spec']);
    const errors: FieldError[] = [];
    const ports = Array.isArray(spec['ports']) ? (spec['ports'] as Array<Record<string, unknown>>) : [];
    if (spec['type'] !== 'ExternalName' && ports.length === 0) errors.push({ field: 'spec.ports', message: 'Required value' });
    for (const [k, port] of ports.entries()) {
      if (typeof port['port'] !== 'number' || port['port'] < 1 || port['port'] > 65535) {
        errors.push({ field: `spec.ports[${k}].port`, message: 'must be between 1 and 65535, inclusive' });
      }
    }
    const before = previous ? record(previous['spec'])['clusterIP'] : undefined;
    if (before !== undefined && spec['clusterIP'] !== before) errors.push({ field: 'spec.clusterIP', message: 'field is immutable' });
    return errors;
  },
};

const pods: ResourceType = {
  group: '',
  version: 'v1',
  resource: 'pods',
  singular: 'pod',
  kind: 'Pod',
  namespaced: true,
  shortNames: ['po'],
  statusSubresource: true,
  generation: true,
  deleteReturnsObject: true,
  validate(object) {
    const containers = record(object['spec'])['containers'];
    if (!Array.isArray(containers) || containers.length === 0) return [{ field: 'spec.containers', message: 'Required value' }];
    return containers.flatMap((c: Record<string, unknown>, k) => [
      ...(typeof c['name'] === 'string' && !nameError(c['name'], 'dns1123-label') ? [] : [{ field: `spec.containers[${k}].name`, message: 'Required value' }]),
      ...(typeof c['image'] === 'string' && c['image'].length > 0 ? [] : [{ field: `spec.containers[${k}].image`, message: 'Required value' }]),
    ]);
  },
};

const namespaces: ResourceType = {
  group: '',
  version: 'v1',
  resource: 'namespaces',
  singular: 'namespace',
  kind: 'Namespace',
  namespaced: false,
  shortNames: ['ns'],
  statusSubresource: true,
};

const serviceaccounts: ResourceType = {
  group: '',
  version: 'v1',
  resource: 'serviceaccounts',
  singular: 'serviceaccount',
  kind: 'ServiceAccount',
  namespaced: true,
  shortNames: ['sa'],
};

const deployments: ResourceType = {
  group: 'apps',
  version: 'v1',
  resource: 'deployments',
  singular: 'deployment',
  kind: 'Deployment',
  namespaced: true,
  shortNames: ['deploy'],
  statusSubresource: true,
  generation: true,
  normalize(object) {
    const spec = record(object['spec']);
    spec['replicas'] ??= 1;
    spec['revisionHistoryLimit'] ??= 10;
    spec['progressDeadlineSeconds'] ??= 600;
    spec['strategy'] ??= { type: 'RollingUpdate', rollingUpdate: { maxSurge: '25%', maxUnavailable: '25%' } };
    object['spec'] = spec;
  },
  validate(object, previous) {
    const spec = record(object['spec']);
    const errors: FieldError[] = [];
    const selector = record(record(spec['selector'])['matchLabels']);
    const templateLabels = record(record(record(spec['template'])['metadata'])['labels']);
    if (Object.keys(selector).length === 0) errors.push({ field: 'spec.selector', message: 'Required value' });
    if (!Object.entries(selector).every(([k, v]) => templateLabels[k] === v)) {
      errors.push({ field: 'spec.template.metadata.labels', message: '`selector` does not match template `labels`' });
    }
    if (typeof spec['replicas'] !== 'number' || spec['replicas'] < 0) errors.push({ field: 'spec.replicas', message: 'must be greater than or equal to 0' });
    errors.push(
      ...(pods.validate?.({ metadata: {}, spec: record(spec['template'])['spec'] }, undefined) ?? []).map((e) => ({ ...e, field: `spec.template.${e.field}` })),
    );
    if (previous && JSON.stringify(record(previous['spec'])['selector']) !== JSON.stringify(spec['selector'])) {
      errors.push({ field: 'spec.selector', message: 'field is immutable' });
    }
    return errors;
  },
};

const persistentvolumeclaims: ResourceType = {
  group: '',
  version: 'v1',
  resource: 'persistentvolumeclaims',
  singular: 'persistentvolumeclaim',
  kind: 'PersistentVolumeClaim',
  namespaced: true,
  shortNames: ['pvc'],
  normalize(object) {
    // Bound at once: the fake has a provisioner for every storage class.
    object['status'] ??= { phase: 'Bound', accessModes: record(object['spec'])['accessModes'] ?? ['ReadWriteOnce'] };
  },
  validate(object, previous) {
    const spec = record(object['spec']);
    const errors: FieldError[] = [];
    const modes = spec['accessModes'];
    if (!Array.isArray(modes) || modes.length === 0) errors.push({ field: 'spec.accessModes', message: 'Required value: at least 1 access mode is required' });
    if (record(record(spec['resources'])['requests'])['storage'] === undefined) errors.push({ field: 'spec.resources[storage]', message: 'Required value' });
    if (previous && JSON.stringify(record(previous['spec'])['accessModes']) !== JSON.stringify(modes)) {
      errors.push({ field: 'spec', message: 'Forbidden: spec is immutable after creation except resources.requests' });
    }
    return errors;
  },
};

const networkpolicies: ResourceType = {
  group: 'networking.k8s.io',
  version: 'v1',
  resource: 'networkpolicies',
  singular: 'networkpolicy',
  kind: 'NetworkPolicy',
  namespaced: true,
  shortNames: ['netpol'],
  generation: true,
  normalize(object) {
    const spec = record(object['spec']);
    // Upstream defaults policyTypes from which rule lists are present.
    spec['policyTypes'] ??= ['Ingress', ...(spec['egress'] !== undefined ? ['Egress'] : [])];
    object['spec'] = spec;
  },
  validate(object) {
    const spec = record(object['spec']);
    const errors: FieldError[] = [];
    if (spec['podSelector'] === undefined) errors.push({ field: 'spec.podSelector', message: 'Required value' });
    for (const [direction, peers] of [
      ['egress', 'to'],
      ['ingress', 'from'],
    ] as const) {
      const rules = spec[direction];
      if (rules === undefined) continue;
      if (!Array.isArray(rules)) {
        errors.push({ field: `spec.${direction}`, message: 'must be a list' });
        continue;
      }
      for (const [k, rule] of (rules as Obj[]).entries()) {
        for (const [j, peer] of ((rule[peers] ?? []) as Obj[]).entries()) {
          const block = record(peer['ipBlock']);
          if (peer['ipBlock'] !== undefined && !CIDR.test(String(block['cidr']))) {
            errors.push({
              field: `spec.${direction}[${k}].${peers}[${j}].ipBlock.cidr`,
              message: `Invalid value: "${String(block['cidr'])}": must be a valid CIDR`,
            });
          }
          for (const except of (block['except'] ?? []) as unknown[]) {
            if (!CIDR.test(String(except)))
              errors.push({
                field: `spec.${direction}[${k}].${peers}[${j}].ipBlock.except`,
                message: `Invalid value: "${String(except)}": must be a valid CIDR`,
              });
          }
        }
      }
    }
    return errors;
  },
};

/** Everything served unless the caller passes its own list. */
export function builtinResources(): ResourceType[] {
  return [namespaces, secrets, configmaps, services, pods, serviceaccounts, deployments, persistentvolumeclaims, networkpolicies, ...clusterAppResources];
}
