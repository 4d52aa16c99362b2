/**
 * Custom auth of the `store` fixture: bearer tokens `user-a` and `user-b`. Every store event is
 * moved into the caller's own namespace (`[identity, ...namespace]`), and user-b may not delete.
 */
import { Auth, HTTPException } from '@langchain/langgraph-sdk/auth';

/** Moves a store event's namespace under the caller's identity. */
function own(value: unknown, identity: string): void {
  const v = value as { namespace?: string[] | null };
  v.namespace = [identity, ...(v.namespace ?? [])];
}

export const auth = new Auth()
  .authenticate(async (request) => {
    const token = request.headers.get('authorization')?.replace(/^Bearer /, '');
    if (token !== 'user-a' && token !== 'user-b') throw new HTTPException(401, { message: 'Invalid token' });
    return { identity: token, permissions: [] };
  })
  .on('store:delete', ({ value, user }) => {
    if (user.identity === 'user-b') return false;
    own(value, user.identity);
  })
  .on('store', ({ value, user }) => own(value, user.identity));
