//! RFC 9111 section 4.4, invalidation by unsafe methods.

use super::*;

/// RFC 9111 section 4.4: after a successful POST whose response names a
/// URL in `Content-Location` or `Location`, the next GET of that URL goes
/// to the origin, even when the GET that stored it had only just finished
/// (its body may still have been being written to the store).
#[test]
fn unsafe_request_invalidates_a_response_that_was_still_being_stored() {
    let (origin, proxy) = start(|req| {
        if req.method == "POST" {
            let target = req.path().replace("/post", "/target");
            let named = req.path().replace("/post", "/named");
            Reply::new(
                201,
                &[("Content-Location", target.as_str()), ("Location", named.as_str())],
                b"created",
            )
        } else {
            Reply::ok(&[("Cache-Control", "max-age=3600")], b"stored")
        }
    });
    for i in 0..20 {
        let target = origin.url(&format!("/{i}/target"));
        let named = origin.url(&format!("/{i}/named"));
        assert_eq!(proxy.get(&target, &[]).status, 200);
        assert_eq!(proxy.get(&named, &[]).status, 200);
        let mut conn = Conn::open(proxy.addr());
        let post = conn.send(
            "POST",
            &origin.url(&format!("/{i}/post")),
            &[("Content-Type", "text/plain")],
            b"abc",
        );
        assert_eq!(post.status, 201, "{}", post.describe());
        for url in [&target, &named] {
            let before = origin.request_count();
            let again = proxy.get(url, &[]);
            assert_eq!(again.status, 200);
            assert_eq!(
                origin.request_count(),
                before + 1,
                "round {i}: {url} was invalidated: {}",
                again.describe()
            );
        }
    }
}

/// Repeated hits are answered from each serving thread's memo of lookups;
/// once a POST invalidated the stored response and a new one was stored,
/// every later hit, on whichever thread and connection, serves the new
/// body and head, never the remembered old one.
#[test]
fn hits_after_an_invalidation_serve_the_new_response_never_a_remembered_one() {
    let version = Arc::new(AtomicUsize::new(1));
    let v = version.clone();
    let (origin, proxy) = start(move |req| {
        if req.method == "POST" {
            v.fetch_add(1, Ordering::SeqCst);
            Reply::new(204, &[], b"")
        } else {
            let n = v.load(Ordering::SeqCst).to_string();
            Reply::ok(
                &[("Cache-Control", "max-age=3600"), ("X-Version", n.as_str())],
                format!("body v{n}").as_bytes(),
            )
        }
    });
    let url = origin.url("/hot");
    for round in 1..=3 {
        let want = format!("body v{round}");
        let first = proxy.get(&url, &[]);
        assert_eq!(first.text(), want, "round {round}: {}", first.describe());
        // The entry is indexed once its body is written (a moment after
        // the response): wait for the first hit.
        let stored = (0..200).any(|_| {
            let again = proxy.get(&url, &[]);
            assert_eq!(again.text(), want, "round {round}: {}", again.describe());
            is_hit(&again) || {
                std::thread::sleep(Duration::from_millis(10));
                false
            }
        });
        assert!(stored, "round {round}: never served from the store");
        // Several connections, so both serving threads remember it.
        let conns: Vec<Conn> = (0..4).map(|_| Conn::open(proxy.addr())).collect();
        for mut c in conns {
            for _ in 0..3 {
                let hit = c.send("GET", &url, &[], b"");
                assert_eq!(hit.text(), want, "round {round}: {}", hit.describe());
                assert_eq!(hit.header("x-version"), Some(round.to_string().as_str()));
                assert!(is_hit(&hit), "{}", status_of(&hit));
            }
        }
        let mut c = Conn::open(proxy.addr());
        assert_eq!(c.send("POST", &url, &[("Content-Type", "text/plain")], b"x").status, 204);
    }
    let posts = origin.requests().iter().filter(|r| r.method == "POST").count();
    assert_eq!(posts, 3);
}
