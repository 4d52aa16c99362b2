/**
 * The pure parts of custom auth: user normalisation, filter parsing, handler choice and results.
 */
import { describe, expect, it } from '@jest/globals';
import { PermissionDeniedError } from '@berth/errors';
import { HTTPException } from '@langchain/langgraph-sdk/auth';
import { AuthHandlerError, AuthHttpError, Authorizer, fromHandlerError, normalizeUser, toMetadataFilter, type AuthContext, type CustomAuth } from './index.js';

const ctx: AuthContext = { user: { identity: 'u1', display_name: 'u1', is_authenticated: true, permissions: ['p'] }, permissions: ['p'] };
const authorizer = (callbacks: Record<string, (input: { value: unknown; user: Record<string, unknown> }) => unknown>) =>
  new Authorizer({ spec: 'x', disableStudioAuth: false, handlers: { authenticate: () => 'u1', callbacks } } as CustomAuth);

describe('normalizeUser', () => {
  it('accepts an identity string or an object with identity, keeping extra fields', () => {
    expect(normalizeUser('ann')).toEqual({ user: { identity: 'ann', display_name: 'ann', is_authenticated: true, permissions: [] }, permissions: [] });
    expect(normalizeUser({ identity: 'bob', permissions: ['r'], org: 'acme', is_authenticated: false })).toEqual({
      user: { identity: 'bob', display_name: 'bob', is_authenticated: false, permissions: ['r'], org: 'acme' },
      permissions: ['r'],
    });
  });

  it('refuses results without an identity', () => {
    for (const bad of [undefined, null, '', 42, { id: 'x' }, { identity: 7 }]) expect(() => normalizeUser(bad)).toThrow(AuthHandlerError);
  });
});

describe('toMetadataFilter', () => {
  it('reads equality, $eq and $contains (one value or all of several)', () => {
    expect(toMetadataFilter('h', { owner: 'a', tier: { $eq: 'gold' }, tags: { $contains: 'x' }, roles: { $contains: ['r', 's'] } })).toEqual([
      { key: 'owner', op: 'eq', value: 'a' },
      { key: 'tier', op: 'eq', value: 'gold' },
      { key: 'tags', op: 'contains', value: ['x'] },
      { key: 'roles', op: 'contains', value: ['r', 's'] },
    ]);
  });

  it('refuses unknown operators and undefined values rather than allowing everything', () => {
    expect(() => toMetadataFilter('h', { owner: { $ne: 'a' } })).toThrow(/unknown operator "\$ne"/);
    expect(() => toMetadataFilter('h', { owner: undefined })).toThrow(/undefined/);
    expect(() => toMetadataFilter('h', { owner: {} })).toThrow(AuthHandlerError);
  });
});

describe('Authorizer', () => {
  it('runs only the most specific handler: resource:action, resource, *:action, *', async () => {
    const calls: string[] = [];
    const handler = (name: string) => () => void calls.push(name);
    const all = { 'threads:read': handler('threads:read'), threads: handler('threads'), '*:read': handler('*:read'), '*': handler('*') };
    await authorizer(all).authorize(ctx, 'threads:read', {});
    await authorizer({ ...all, 'threads:read': undefined as never }).authorize(ctx, 'threads:read', {});
    await authorizer({ '*:read': handler('*:read'), '*': handler('*') }).authorize(ctx, 'assistants:read', {});
    await authorizer({ '*': handler('*') }).authorize(ctx, 'assistants:create', {});
    expect(calls).toEqual(['threads:read', 'threads', '*:read', '*']);
    expect(await authorizer({ assistants: handler('assistants') }).authorize(ctx, 'threads:read', { a: 1 })).toEqual({ filter: undefined, value: { a: 1 } });
  });

  it('hands the handler a mutable copy and returns its edits and filter', async () => {
    const original = { metadata: { x: 1 } };
    const result = await authorizer({
      'threads:create': ({ value, user }) => {
        (value as { metadata: Record<string, unknown> }).metadata.owner = user.identity;
        return { owner: user.identity };
      },
    }).authorize(ctx, 'threads:create', original);
    expect(original).toEqual({ metadata: { x: 1 } });
    expect(result).toEqual({ value: { metadata: { x: 1, owner: 'u1' } }, filter: [{ key: 'owner', op: 'eq', value: 'u1' }] });
  });

  it('maps results and errors: false → 403, HTTPException → its status, others → 500', async () => {
    const run = (result: () => unknown) => authorizer({ '*': result }).authorize(ctx, 'threads:read', {});
    await expect(run(() => true)).resolves.toEqual({ filter: undefined, value: {} });
    await expect(run(() => false)).rejects.toThrow(PermissionDeniedError);
    await expect(run(() => 'yes')).rejects.toThrow(AuthHandlerError);
    await expect(run(() => [])).rejects.toThrow(AuthHandlerError);
    await expect(run(() => Promise.reject(new Error('db down')))).rejects.toThrow(AuthHandlerError);
    const thrown = run(() => {
      throw new HTTPException(402, { message: 'pay up', headers: { 'X-A': 'b' } });
    });
    await expect(thrown).rejects.toMatchObject({ status: 402, message: 'pay up', headers: { 'x-a': 'b' } });
    await expect(authorizer({ '*': () => false }).authorize(undefined, 'threads:read', {})).resolves.toEqual({ filter: undefined, value: {} });
  });

  it('turns an HTTPException without a message into its standard text', () => {
    const error = fromHandlerError('authenticate', new HTTPException(401));
    expect(error).toBeInstanceOf(AuthHttpError);
    expect(error).toMatchObject({ status: 401, message: 'Unauthorized', code: 'unauthenticated' });
  });
});
