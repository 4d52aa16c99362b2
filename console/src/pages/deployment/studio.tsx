/**
 * A deployment's Studio (`/deployments/{deployment_id}/studio`): Studio on the deployment URL of the
 * same origin (`/d/{deployment_id}`), as the signed-in console session (the gateway takes it there,
 * with the CSRF token on unsafe calls). A project with its own auth handler decides for itself: the
 * session counts for nothing there, and its calls answer that handler's 401/403.
 */
import { createRoute, Link, useNavigate } from '@tanstack/react-router';
import { useMemo } from 'react';
import { csrfHeaders } from '../../api';
import { PageTitle } from '../../components/ui';
import { authedRoute } from '../../routes/root';
import { LazyStudio } from '../../studio/lazy';

function DeploymentStudioPage() {
  const { deploymentId } = deploymentStudioRoute.useParams();
  const { tab } = deploymentStudioRoute.useSearch();
  const navigate = useNavigate({ from: deploymentStudioRoute.fullPath });
  // The session is known here (the signed-in route read it), and with it its CSRF token.
  const target = useMemo(
    () => ({ apiUrl: `${location.origin}/d/${encodeURIComponent(deploymentId)}`, headers: csrfHeaders(), key: deploymentId }),
    [deploymentId],
  );
  return (
    <>
      <nav aria-label="Breadcrumb" className="flex gap-2 text-sm">
        <Link to="/deployments" className="text-slate-700 underline dark:text-slate-300">
          Deployments
        </Link>
        <span aria-hidden="true">/</span>
        <Link to="/deployments/$deploymentId" params={{ deploymentId }} className="text-slate-700 underline dark:text-slate-300">
          Deployment
        </Link>
      </nav>
      <div className="mt-2 mb-4">
        <PageTitle>Studio</PageTitle>
      </div>
      <LazyStudio target={target} tab={tab} onTab={(id) => void navigate({ search: { tab: id }, replace: true })} />
    </>
  );
}

export const deploymentStudioRoute = createRoute({
  getParentRoute: () => authedRoute,
  path: '/deployments/$deploymentId/studio',
  // The open tab (`?tab=graph`, …): a link opens Studio where it was.
  validateSearch: (search: Record<string, unknown>): { tab?: string } =>
    typeof search.tab === 'string' && /^[a-z-]{1,32}$/.test(search.tab) ? { tab: search.tab } : {},
  component: DeploymentStudioPage,
});
