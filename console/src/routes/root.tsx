/**
 * The root of the route tree and the signed-in part of it: every page but the sign-in page sits
 * under `authedRoute`, which sends a visitor without a session to the sign-in page (and back after).
 */
import type { QueryClient } from '@tanstack/react-query';
import { createRootRouteWithContext, createRoute, Link, Outlet, redirect } from '@tanstack/react-router';
import { Shell } from '../components/shell';
import { sessionOrNull } from '../session';

export interface RouterContext {
  queryClient: QueryClient;
}

function NotFound() {
  return (
    <main className="mx-auto max-w-xl p-8">
      <h1 className="text-xl font-semibold">Page not found</h1>
      <p className="mt-2 text-slate-700 dark:text-slate-300">
        There is no console page here. <Link to="/deployments">Go to the deployments</Link>.
      </p>
    </main>
  );
}

export const rootRoute = createRootRouteWithContext<RouterContext>()({
  component: Outlet,
  notFoundComponent: NotFound,
});

/** A path of this origin to go back to after signing in (never another origin: `//host` is refused). */
export function localPath(value: unknown): string | undefined {
  return typeof value === 'string' && value.startsWith('/') && !value.startsWith('//') && !value.startsWith('/\\') ? value : undefined;
}

export const authedRoute = createRoute({
  getParentRoute: () => rootRoute,
  id: 'signed-in',
  beforeLoad: async ({ context, location }) => {
    const session = await sessionOrNull(context.queryClient);
    if (!session) throw redirect({ to: '/sign-in', search: { redirect: location.href } });
    return { session };
  },
  component: Shell,
});

export const indexRoute = createRoute({
  getParentRoute: () => authedRoute,
  path: '/',
  beforeLoad: () => {
    throw redirect({ to: '/deployments' });
  },
});
