/**
 * The kinds an application's Helm chart installs beside pods and services: RBAC Roles and
 * RoleBindings, PodDisruptionBudgets, Ingresses and batch Jobs (hooks), with the server-side
 * validation an operator would hit (a binding's immutable `roleRef`, a budget with both or neither
 * of `minAvailable` / `maxUnavailable`, an Ingress rule without a backend, a Job's restart policy).
 */
import { record, type FieldError, type KubeObject, type ResourceType } from './types.js';

type Obj = Record<string, unknown>;

function list(value: unknown): Obj[] {
  return Array.isArray(value) ? value.map(record) : [];
}

const roles: ResourceType = {
  group: 'rbac.authorization.k8s.io',
  version: 'v1',
  resource: 'roles',
  singular: 'role',
  kind: 'Role',
  namespaced: true,
  validate(object) {
    return list(object['rules']).flatMap((rule, k): FieldError[] =>
      Array.isArray(rule['verbs']) && rule['verbs'].length > 0
        ? []
        : [{ field: `rules[${k}].verbs`, message: 'Required value: verbs must contain at least one value' }],
    );
  },
};

const rolebindings: ResourceType = {
  group: 'rbac.authorization.k8s.io',
  version: 'v1',
  resource: 'rolebindings',
  singular: 'rolebinding',
  kind: 'RoleBinding',
  namespaced: true,
  validate(object, previous) {
    const roleRef = record(object['roleRef']);
    const errors: FieldError[] = [];
    if (roleRef['kind'] !== 'Role' && roleRef['kind'] !== 'ClusterRole')
      errors.push({ field: 'roleRef.kind', message: 'Unsupported value: may only be Role or ClusterRole' });
    if (typeof roleRef['name'] !== 'string' || roleRef['name'] === '') errors.push({ field: 'roleRef.name', message: 'Required value' });
    for (const [k, subject] of list(object['subjects']).entries()) {
      if (typeof subject['name'] !== 'string' || subject['name'] === '') errors.push({ field: `subjects[${k}].name`, message: 'Required value' });
    }
    if (previous && JSON.stringify(previous['roleRef']) !== JSON.stringify(object['roleRef'])) {
      errors.push({ field: 'roleRef', message: 'Invalid value: cannot change roleRef' });
    }
    return errors;
  },
};

const poddisruptionbudgets: ResourceType = {
  group: 'policy',
  version: 'v1',
  resource: 'poddisruptionbudgets',
  singular: 'poddisruptionbudget',
  kind: 'PodDisruptionBudget',
  namespaced: true,
  shortNames: ['pdb'],
  statusSubresource: true,
  generation: true,
  validate(object) {
    const spec = record(object['spec']);
    const errors: FieldError[] = [];
    if ((spec['minAvailable'] === undefined) === (spec['maxUnavailable'] === undefined)) {
      errors.push({ field: 'spec', message: 'Invalid value: minAvailable and maxUnavailable cannot be both set (one is required)' });
    }
    for (const key of ['minAvailable', 'maxUnavailable']) {
      const value = spec[key];
      if (value !== undefined && !(typeof value === 'number' ? value >= 0 : /^[0-9]+%$/.test(String(value)))) {
        errors.push({ field: `spec.${key}`, message: `Invalid value: "${String(value)}": must be a non-negative integer or a percentage` });
      }
    }
    return errors;
  },
};

const ingresses: ResourceType = {
  group: 'networking.k8s.io',
  version: 'v1',
  resource: 'ingresses',
  singular: 'ingress',
  kind: 'Ingress',
  namespaced: true,
  shortNames: ['ing'],
  statusSubresource: true,
  generation: true,
  validate(object) {
    const spec = record(object['spec']);
    const errors: FieldError[] = [];
    const rules = list(spec['rules']);
    if (rules.length === 0 && spec['defaultBackend'] === undefined)
      errors.push({ field: 'spec.rules', message: 'Required value: either `defaultBackend` or `rules` must be specified' });
    for (const [k, rule] of rules.entries()) {
      for (const [j, path] of list(record(rule['http'])['paths']).entries()) {
        const at = `spec.rules[${k}].http.paths[${j}]`;
        if (!['Exact', 'Prefix', 'ImplementationSpecific'].includes(String(path['pathType'])))
          errors.push({ field: `${at}.pathType`, message: 'Unsupported value: supported values: "Exact", "ImplementationSpecific", "Prefix"' });
        if (path['backend'] === undefined) errors.push({ field: `${at}.backend`, message: 'Required value' });
      }
    }
    return errors;
  },
};

const jobs: ResourceType = {
  group: 'batch',
  version: 'v1',
  resource: 'jobs',
  singular: 'job',
  kind: 'Job',
  namespaced: true,
  statusSubresource: true,
  generation: true,
  normalize(object: KubeObject) {
    const spec = record(object['spec']);
    spec['backoffLimit'] ??= 6;
    spec['completions'] ??= 1;
    spec['parallelism'] ??= 1;
    object['spec'] = spec;
  },
  validate(object, previous) {
    const spec = record(object['spec']);
    const podSpec = record(record(spec['template'])['spec']);
    const errors: FieldError[] = [];
    if (podSpec['restartPolicy'] !== 'Never' && podSpec['restartPolicy'] !== 'OnFailure') {
      errors.push({ field: 'spec.template.spec.restartPolicy', message: 'Unsupported value: supported values: "OnFailure", "Never"' });
    }
    if (!Array.isArray(podSpec['containers']) || podSpec['containers'].length === 0)
      errors.push({ field: 'spec.template.spec.containers', message: 'Required value' });
    if (previous && JSON.stringify(record(previous['spec'])['template']) !== JSON.stringify(spec['template'])) {
      errors.push({ field: 'spec.template', message: 'field is immutable' });
    }
    return errors;
  },
};

export const clusterAppResources: ResourceType[] = [roles, rolebindings, poddisruptionbudgets, ingresses, jobs];
