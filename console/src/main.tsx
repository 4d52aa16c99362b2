import '@fontsource-variable/inter';
import './styles.css';
import { MutationCache, QueryCache, QueryClient, QueryClientProvider } from '@tanstack/react-query';
import { RouterProvider } from '@tanstack/react-router';
import { StrictMode } from 'react';
import { createRoot } from 'react-dom/client';
import { ApiError } from './api';
import { makeRouter } from './router';
import { sessionQuery } from './session';
import { StandaloneStudio, standaloneStudio } from './studio/standalone';
import { initTheme } from './theme';

initTheme();

/**
 * A 401 on any call of the console's API means the session ended (signed out elsewhere, expired, its
 * key revoked): sign in again. Not Studio's (the SDK's errors): a project's own auth handler may
 * answer 401 at its deployment URL while the session is fine.
 */
function onError(error: Error): void {
  if (standaloneStudio || !(error instanceof ApiError) || error.status !== 401) return;
  queryClient.setQueryData(sessionQuery.queryKey, null);
  const here = router.state.location;
  if (here.pathname !== '/sign-in') void router.navigate({ to: '/sign-in', search: { redirect: here.href } });
}

const queryClient = new QueryClient({
  queryCache: new QueryCache({ onError }),
  mutationCache: new MutationCache({ onError }),
  defaultOptions: {
    queries: {
      // A 4xx will answer the same again; only a server's or the network's trouble is worth retrying.
      // (The console's ApiError and the SDK's HTTPError, Studio's, both carry the answer's status.)
      retry: (count, error) => {
        const status = (error as unknown as { status?: unknown }).status;
        return count < 2 && !(typeof status === 'number' && status < 500);
      },
    },
  },
});
const router = makeRouter(queryClient);

createRoot(document.getElementById('root')!).render(
  <StrictMode>
    <QueryClientProvider client={queryClient}>{standaloneStudio ? <StandaloneStudio /> : <RouterProvider router={router} />}</QueryClientProvider>
  </StrictMode>,
);
