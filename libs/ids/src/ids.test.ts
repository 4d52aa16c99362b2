/**
 * One rule per kind of id or name: the CLI, the gateway and the control plane agree on them.
 */
import { describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { EnvVarName, isDeploymentName, isSecretName, isUuid, toDeploymentName } from './index.js';

describe('ids and names', () => {
  it('accepts UUIDs in either case and refuses look-alikes', () => {
    const id = randomUUID();
    expect(isUuid(id)).toBe(true);
    expect(isUuid(id.toUpperCase())).toBe(true);
    expect(isUuid('6ba7b821-9dad-11d1-80b4-00c04fd430c8')).toBe(true); // the v1 namespace of system assistants
    for (const bad of ['', 'not-a-uuid', `${id}0`, id.replaceAll('-', ''), `{${id}}`, `${id}\n`]) expect(isUuid(bad)).toBe(false);
  });

  it('allows deployment names that are DNS labels', () => {
    for (const good of ['a', 'my-agent', '0-x', 'a'.repeat(63)]) expect(isDeploymentName(good)).toBe(true);
    for (const bad of ['', '-a', 'A', 'my_agent', 'a'.repeat(64), 'é']) expect(isDeploymentName(bad)).toBe(false);
  });

  it('suggests a deployment name from a folder name', () => {
    expect(toDeploymentName('my-agent')).toBe('my-agent');
    expect(toDeploymentName('My Agent (v2)')).toBe('my-agent-v2');
    expect(toDeploymentName('--Weird..Name!!')).toBe('weird-name');
    expect(toDeploymentName('Café Crème')).toBe('cafe-creme');
    expect(toDeploymentName('2024 project')).toBe('2024-project');
    expect(toDeploymentName(`--${'x'.repeat(70)}`)).toBe('x'.repeat(63));
    // Cut at 63, then no dash may end it.
    expect(toDeploymentName(`${'a'.repeat(62)}-b`)).toBe('a'.repeat(62));
    expect(toDeploymentName('___')).toBeUndefined();
    expect(toDeploymentName('日本語')).toBeUndefined();
  });

  it('allows secret names that are environment variable names', () => {
    for (const good of ['OPENAI_API_KEY', '_x', 'a1']) expect(isSecretName(good)).toBe(true);
    for (const bad of ['', '1A', 'A-B', 'A B', 'x'.repeat(256)]) expect(isSecretName(bad)).toBe(false);
  });

  it('takes the same environment variable names for a sandbox command as for secrets', () => {
    for (const name of ['OPENAI_API_KEY', '_x', 'a1', 'x'.repeat(255), '', '1A', 'A-B', 'A=B', 'x'.repeat(256)]) {
      expect({ name, env: EnvVarName.safeParse(name).success }).toEqual({ name, env: isSecretName(name) });
    }
  });
});
