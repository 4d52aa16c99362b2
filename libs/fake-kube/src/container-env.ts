/**
 * The environment a kubelet gives a container: its `envFrom` ConfigMaps and Secrets first, then its
 * `env` literals and key references over them. Tests that run a stored Deployment's containers as
 * processes (or under Podman) take their environment from here, not from a hand-made copy.
 */
import type { ObjectStore } from './store.js';

export interface EnvContainer {
  name: string;
  envFrom?: { configMapRef?: { name: string; optional?: boolean }; secretRef?: { name: string; optional?: boolean } }[];
  env?: {
    name: string;
    value?: string;
    valueFrom?: { secretKeyRef?: { name: string; key: string; optional?: boolean }; configMapKeyRef?: { name: string; key: string; optional?: boolean } };
  }[];
}

/** The values of a ConfigMap or Secret (decoded), or undefined when there is none of that name. */
export type EnvSource = (kind: 'ConfigMap' | 'Secret', name: string) => Record<string, string> | undefined;

/** A container refers to what is not there, or to a source these tests do not resolve (fieldRef, …). */
export class ContainerEnvError extends Error {
  override name = 'ContainerEnvError';
}

export function containerEnv(container: EnvContainer, source: EnvSource): Record<string, string> {
  const env: Record<string, string> = {};
  const values = (kind: 'ConfigMap' | 'Secret', name: string, optional?: boolean) => {
    const found = source(kind, name);
    if (!found && !optional) throw new ContainerEnvError(`container ${container.name} refers to ${kind} ${name}, which does not exist`);
    return found ?? {};
  };
  for (const from of container.envFrom ?? []) {
    if (from.configMapRef) Object.assign(env, values('ConfigMap', from.configMapRef.name, from.configMapRef.optional));
    else if (from.secretRef) Object.assign(env, values('Secret', from.secretRef.name, from.secretRef.optional));
    else throw new ContainerEnvError(`container ${container.name}: only envFrom configMapRef and secretRef are resolved`);
  }
  for (const variable of container.env ?? []) {
    if (variable.value !== undefined) {
      env[variable.name] = variable.value;
      continue;
    }
    const secretRef = variable.valueFrom?.secretKeyRef;
    const ref = secretRef ?? variable.valueFrom?.configMapKeyRef;
    if (!ref) throw new ContainerEnvError(`container ${container.name}: env ${variable.name} is neither a value nor a key reference`);
    const value = values(secretRef ? 'Secret' : 'ConfigMap', ref.name, ref.optional)[ref.key];
    if (value !== undefined) env[variable.name] = value;
    else if (!ref.optional)
      throw new ContainerEnvError(`container ${container.name}: env ${variable.name} refers to ${ref.name}/${ref.key}, which does not exist`);
  }
  return env;
}

/** An EnvSource reading the ConfigMaps and Secrets of `namespace` in the fake's store. */
export function storeEnvSource(store: ObjectStore, namespace: string): EnvSource {
  return (kind, name) => {
    const object = store.find(kind === 'Secret' ? 'secrets' : 'configmaps', namespace, name) as
      { data?: Record<string, string>; stringData?: Record<string, string> } | undefined;
    if (!object) return undefined;
    const data = Object.entries(object.data ?? {}).map(([key, value]) => [key, kind === 'Secret' ? Buffer.from(value, 'base64').toString('utf8') : value]);
    return { ...Object.fromEntries(data), ...object.stringData };
  };
}
