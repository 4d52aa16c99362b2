/**
 * Custom auth of the `auth` fixture: bearer tokens `user-a` and `user-b`; threads belong to the
 * user who created them (`metadata.owner`), and each user only sees their own (crons too); assistants can
 * never be deleted, never be updated (418), and searches see what their `audience` allows.
 * Token `crash` makes authenticate throw a plain Error; `nameless` returns no identity.
 */
import { Auth, HTTPException, isStudioUser, type AuthFilters } from '@langchain/langgraph-sdk/auth';

const USERS: Record<string, { permissions: string[]; org: string }> = {
  'user-a': { permissions: ['threads:write', 'threads:read'], org: 'acme' },
  'user-b': { permissions: ['threads:read'], org: 'globex' },
};

export const auth = new Auth()
  .authenticate(async (request) => {
    const header = request.headers.get('authorization');
    const token = header?.startsWith('Bearer ') ? header.slice('Bearer '.length) : undefined;
    if (token === 'crash') throw new Error('token store unreachable');
    if (token === 'nameless') return { permissions: [] } as unknown as string;
    const user = token ? USERS[token] : undefined;
    if (!token || !user) {
      throw new HTTPException(401, { message: token ? 'Invalid token' : 'Missing bearer token', headers: { 'WWW-Authenticate': 'Bearer' } });
    }
    return { identity: token, permissions: user.permissions, org: user.org, url: request.url };
  })
  .on('threads:create', ({ value, user }) => {
    value.metadata = { ...value.metadata, owner: user.identity };
    return { owner: user.identity };
  })
  .on('threads:create_run', ({ value, user }) => {
    value.metadata = { ...value.metadata, owner: user.identity };
    return { owner: user.identity };
  })
  .on('threads', ({ user }) => ({ owner: user.identity }))
  .on('crons:create', ({ value, user }) => {
    // The SDK's CronCreate value does not declare metadata; the server passes the cron's.
    const cron = value as typeof value & { metadata?: Record<string, unknown> };
    cron.metadata = { ...cron.metadata, owner: user.identity };
    return { owner: user.identity };
  })
  .on('crons', ({ user }) => ({ owner: user.identity }))
  .on('assistants:delete', () => false)
  .on('assistants:update', () => {
    throw new HTTPException(418, { message: 'No updates today', headers: { 'X-Teapot': 'yes' } });
  })
  .on('assistants:search', ({ user }): AuthFilters<string> | undefined => {
    if (isStudioUser(user)) return undefined;
    if (user.identity === 'user-a') return { audience: { $contains: 'user-a' } };
    // All of several values, and an explicit $eq.
    return { audience: { $contains: ['user-b', 'staff'] as unknown as string }, tier: { $eq: 'gold' } };
  });

/** Not an Auth: a langgraph.json naming it must stop the server at startup. */
export const notAuth = { authenticate: () => 'someone' };
