//! Paths between hosts and the routes that make them work. Only hosts with `router = true`
//! forward, so only they may sit inside a path.

use std::collections::VecDeque;

/// The host graph: which hosts forward, and which two hosts each link joins.
#[derive(Debug, Clone)]
pub struct Graph {
    /// `routers[h]`: host `h` forwards.
    pub routers: Vec<bool>,
    /// `links[l] = (a, b)`: link `l` joins hosts `a` and `b` (indices into `routers`).
    pub links: Vec<(usize, usize)>,
}

/// Per host: the (link, previous host) that reached it in a search.
type Parents = Vec<Option<(usize, usize)>>;

/// One hop of a path: the link taken and the host reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hop {
    /// Link index.
    pub link: usize,
    /// The host at the far end of the link.
    pub to: usize,
}

/// A route: in host `host`, packets for link `dest_link`'s subnet go over link `via_link` to
/// the neighbour `next_hop`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    /// The host that gets the route.
    pub host: usize,
    /// The link whose subnet is the destination.
    pub dest_link: usize,
    /// The link leading to the next hop.
    pub via_link: usize,
    /// The next hop host.
    pub next_hop: usize,
}

impl Graph {
    fn other_end(&self, link: usize, host: usize) -> Option<usize> {
        let (a, b) = *self.links.get(link)?;
        if a == host {
            Some(b)
        } else if b == host {
            Some(a)
        } else {
            None
        }
    }

    fn is_router(&self, h: usize) -> bool {
        self.routers.get(h).copied().unwrap_or(false)
    }

    /// Breadth-first search from `from`, expanding only the source and routers. Returns, per
    /// host, the hop that reached it (`None` for the source and unreachable hosts) and the
    /// distance.
    fn bfs(&self, from: usize) -> (Parents, Vec<Option<usize>>) {
        let n = self.routers.len();
        let mut parent: Parents = vec![None; n];
        let mut dist: Vec<Option<usize>> = vec![None; n];
        if from >= n {
            return (parent, dist);
        }
        dist[from] = Some(0);
        let mut queue = VecDeque::from([from]);
        while let Some(u) = queue.pop_front() {
            if u != from && !self.is_router(u) {
                continue;
            }
            let du = dist[u].unwrap_or(0);
            for l in 0..self.links.len() {
                let Some(v) = self.other_end(l, u) else {
                    continue;
                };
                if v < n && dist[v].is_none() {
                    dist[v] = Some(du + 1);
                    parent[v] = Some((l, u));
                    queue.push_back(v);
                }
            }
        }
        (parent, dist)
    }

    /// The shortest path from `from` to `to` whose inner hosts all forward, or `None`.
    pub fn shortest_path(&self, from: usize, to: usize) -> Option<Vec<Hop>> {
        if from == to {
            return Some(Vec::new());
        }
        let (parent, dist) = self.bfs(from);
        dist.get(to).copied().flatten()?;
        let mut hops = Vec::new();
        let mut cur = to;
        while cur != from {
            let (link, prev) = parent[cur]?;
            hops.push(Hop { link, to: cur });
            cur = prev;
        }
        hops.reverse();
        Some(hops)
    }

    /// The shortest path from `from` through each of `via` (routers) in order to `to`.
    pub fn path_through(&self, from: usize, via: &[usize], to: usize) -> Option<Vec<Hop>> {
        let mut hops = Vec::new();
        let mut cur = from;
        for &v in via.iter().chain(std::iter::once(&to)) {
            if v != to && !self.is_router(v) {
                return None;
            }
            hops.extend(self.shortest_path(cur, v)?);
            cur = v;
        }
        Some(hops)
    }

    /// Every route each host needs to reach the subnets of links it is not on. A subnet is
    /// reached through its nearest end; on a tie, the end that forwards wins (it can deliver to
    /// both ends' addresses).
    pub fn routes(&self) -> Vec<Route> {
        let mut out = Vec::new();
        for h in 0..self.routers.len() {
            let (parent, dist) = self.bfs(h);
            for (l, &(a, b)) in self.links.iter().enumerate() {
                if a == h || b == h {
                    continue;
                }
                let best = [a, b]
                    .into_iter()
                    .filter_map(|e| Some((dist.get(e).copied().flatten()?, !self.is_router(e), e)))
                    .min_by_key(|&(d, not_router, _)| (d, not_router));
                let Some((_, _, end)) = best else {
                    continue;
                };
                // Walk back to the first hop.
                let mut cur = end;
                let mut first = None;
                while cur != h {
                    let Some((link, prev)) = parent[cur] else {
                        break;
                    };
                    first = Some((link, cur));
                    cur = prev;
                }
                if let Some((via_link, next_hop)) = first {
                    out.push(Route {
                        host: h,
                        dest_link: l,
                        via_link,
                        next_hop,
                    });
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// client(0) – router(1) – server(2), plus a direct client – server link.
    fn triangle() -> Graph {
        Graph {
            routers: vec![false, true, false],
            links: vec![(0, 2), (0, 1), (1, 2)],
        }
    }

    #[test]
    fn shortest_path_prefers_the_direct_link() {
        let g = triangle();
        assert_eq!(g.shortest_path(0, 2).unwrap(), vec![Hop { link: 0, to: 2 }]);
    }

    #[test]
    fn path_through_a_router() {
        let g = triangle();
        let p = g.path_through(0, &[1], 2).unwrap();
        assert_eq!(p, vec![Hop { link: 1, to: 1 }, Hop { link: 2, to: 2 }]);
        assert!(
            g.path_through(0, &[2], 1).is_none(),
            "server does not forward"
        );
    }

    #[test]
    fn non_routers_do_not_forward() {
        // a – b – c with b not a router: no path a → c.
        let g = Graph {
            routers: vec![false, false, false],
            links: vec![(0, 1), (1, 2)],
        };
        assert!(g.shortest_path(0, 2).is_none());
        // a can still reach b's address on the b–c link (b accepts it as its own), and c
        // b's address on the a–b link.
        let r = g.routes();
        assert_eq!(r.len(), 2);
        assert!(r.iter().all(|x| x.next_hop == 1));
    }

    #[test]
    fn routes_across_a_chain_of_routers() {
        // a – r1 – r2 – b
        let g = Graph {
            routers: vec![false, true, true, false],
            links: vec![(0, 1), (1, 2), (2, 3)],
        };
        let r = g.routes();
        let find = |h, l| r.iter().find(|x| x.host == h && x.dest_link == l).copied();
        // a reaches link 1 and 2 via r1 over link 0.
        assert_eq!(find(0, 1).unwrap().next_hop, 1);
        assert_eq!(find(0, 2).unwrap().via_link, 0);
        // b reaches link 0 via r2.
        assert_eq!(find(3, 0).unwrap().next_hop, 2);
        // r1 reaches link 2 via r2.
        assert_eq!(find(1, 2).unwrap().next_hop, 2);
        assert_eq!(r.len(), 2 + 2 + 1 + 1);
    }

    #[test]
    fn a_tie_goes_to_the_forwarding_end() {
        let g = triangle();
        let r = g.routes();
        // client reaches the router–server subnet through the router, not over the direct
        // link to the server (which would not forward to the router's address).
        let c = r.iter().find(|x| x.host == 0 && x.dest_link == 2).unwrap();
        assert_eq!((c.via_link, c.next_hop), (1, 1));
    }
}
