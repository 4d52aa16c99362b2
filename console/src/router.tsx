/**
 * The route tree. Its paths are the console's pages that the gateway answers with index.html
 * (services/gateway/src/console.ts lists the same ones; a browser test opens each of them).
 */
import type { QueryClient } from '@tanstack/react-query';
import { createRouter } from '@tanstack/react-router';
import { deploymentRoute } from './pages/deployment/page';
import { deploymentStudioRoute } from './pages/deployment/studio';
import { deploymentsRoute } from './pages/deployments';
import { signInRoute } from './pages/sign-in';
import { statusRoute } from './pages/status';
import { traceRoute } from './pages/trace/page';
import { projectsRoute } from './pages/traces/projects';
import { runsRoute } from './pages/traces/runs';
import { authedRoute, indexRoute, rootRoute } from './routes/root';

const routeTree = rootRoute.addChildren([
  signInRoute,
  authedRoute.addChildren([indexRoute, deploymentsRoute, deploymentRoute, deploymentStudioRoute, statusRoute, projectsRoute, runsRoute, traceRoute]),
]);

export function makeRouter(queryClient: QueryClient) {
  return createRouter({ routeTree, context: { queryClient }, defaultPreload: false, scrollRestoration: true });
}

declare module '@tanstack/react-router' {
  interface Register {
    router: ReturnType<typeof makeRouter>;
  }
}
