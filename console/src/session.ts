/** The session as the console's queries keep it. */
import { queryOptions, type QueryClient } from '@tanstack/react-query';
import { currentSession, type Session } from './api';

/** The session (null without one), read once and kept until sign-in, sign-out or a 401 changes it. */
export const sessionQuery = queryOptions({
  queryKey: ['session'],
  queryFn: ({ signal }) => currentSession(signal),
  staleTime: Infinity,
});

/**
 * The session, or null when there is none or it cannot be checked now (the gateway unreachable):
 * either way the sign-in page is where to go, and it says what its own call answers.
 */
export async function sessionOrNull(queryClient: QueryClient): Promise<Session | null> {
  try {
    return await queryClient.ensureQueryData(sessionQuery);
  } catch {
    return null;
  }
}
