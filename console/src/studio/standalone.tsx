/**
 * Studio alone, as `berth dev`'s agent server serves it at `/studio` (index.html then carries
 * `<meta name="berth-console" content="studio">`): its own origin's API, no sign-in (the
 * developer's own local server takes none, as its API takes none), no console pages around it.
 */
import { PageTitle } from '../components/ui';
import { LazyStudio } from './lazy';

const target = { apiUrl: location.origin, headers: {}, key: 'local' };

/** Whether this page is `berth dev`'s Studio rather than the gateway's console. */
export const standaloneStudio = document.querySelector<HTMLMetaElement>('meta[name="berth-console"]')?.content === 'studio';

export function StandaloneStudio() {
  return (
    <main className="mx-auto max-w-7xl p-6">
      <div className="mb-4 flex items-baseline gap-3">
        <PageTitle>Studio</PageTitle>
        <span className="font-mono text-sm text-slate-700 dark:text-slate-300">{location.origin}</span>
      </div>
      <LazyStudio target={target} />
    </main>
  );
}
