/**
 * A link to a console page by its path (a page of another part of the router: a deployment's page,
 * a trace's page): a real `<a href>` (open in a new tab, copy the link), and
 * a plain click stays in the app, as a router `Link` would.
 */
import { useRouter } from '@tanstack/react-router';
import type { AnchorHTMLAttributes, MouseEvent } from 'react';

export function usePathNavigate(): (path: string) => void {
  const router = useRouter();
  return (path) => router.history.push(path);
}

export function PathLink({ href, ...rest }: AnchorHTMLAttributes<HTMLAnchorElement> & { href: string }) {
  const go = usePathNavigate();
  const onClick = (event: MouseEvent<HTMLAnchorElement>) => {
    rest.onClick?.(event);
    if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
    event.preventDefault();
    go(href);
  };
  return <a href={href} {...rest} onClick={onClick} />;
}
