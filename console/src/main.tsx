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

/** A 401 on any call means the session ended (signed out elsewhere, expired, its key revoked): sign in again. */
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
      retry: (count, error) => count < 2 && !(error instanceof ApiError && error.status < 500),
    },
  },
});
const router = makeRouter(queryClient);

createRoot(document.getElementById('root')!).render(
  <StrictMode>
    <QueryClientProvider client={queryClient}>{standaloneStudio ? <StandaloneStudio /> : <RouterProvider router={router} />}</QueryClientProvider>
  </StrictMode>,
);
