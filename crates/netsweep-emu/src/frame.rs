//! What the emulator reads in a frame's headers: its IP protocol (to emulate one protocol
//! only), its DSCP class (its strict-priority band) and its flow (FQ-CoDel's queue). Pure functions of the bytes, past one
//! 802.1Q tag; anything else is "not IP".

/// The IP protocol of an Ethernet frame (IPv4's protocol, IPv6's next header), `None` for a
/// frame that is not IP.
pub fn protocol_of(frame: &[u8]) -> Option<u8> {
    let (ethertype, ip) = ether(frame)?;
    match ethertype {
        0x0800 if frame.len() > ip + 9 => Some(frame[ip + 9]),
        0x86DD if frame.len() > ip + 6 => Some(frame[ip + 6]),
        _ => None,
    }
}

/// The EtherType and where the IP header starts, past one 802.1Q tag.
fn ether(frame: &[u8]) -> Option<(u16, usize)> {
    if frame.len() < 14 {
        return None;
    }
    let ethertype = u16::from_be_bytes([frame[12], frame[13]]);
    if ethertype == 0x8100 && frame.len() >= 18 {
        return Some((u16::from_be_bytes([frame[16], frame[17]]), 18));
    }
    Some((ethertype, 14))
}

/// The flow hash of an Ethernet frame (FQ-CoDel's queue): FNV-1a over its addresses, IP
/// protocol and, for TCP, UDP and UDP-Lite, its ports — one value per 5-tuple. A frame that
/// is not IP, or an IPv4 fragment after the first, hashes its addresses and protocol only (0
/// for not IP).
pub fn flow_of(frame: &[u8]) -> u32 {
    let Some((ethertype, ip)) = ether(frame) else {
        return 0;
    };
    let (addrs, proto, l4) = match ethertype {
        0x0800 if frame.len() >= ip + 20 && frame[ip] >> 4 == 4 => {
            let ihl = usize::from(frame[ip] & 0x0f) * 4;
            let later_fragment = u16::from_be_bytes([frame[ip + 6], frame[ip + 7]]) & 0x1fff != 0;
            let l4 = (!later_fragment).then_some(ip + ihl);
            (&frame[ip + 12..ip + 20], frame[ip + 9], l4)
        }
        0x86DD if frame.len() >= ip + 40 && frame[ip] >> 4 == 6 => {
            (&frame[ip + 8..ip + 40], frame[ip + 6], Some(ip + 40))
        }
        _ => return 0,
    };
    let mut h: u32 = 0x811c_9dc5;
    let mut mix = |b: u8| {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    };
    addrs.iter().copied().for_each(&mut mix);
    mix(proto);
    if let Some(at) = l4.filter(|_| matches!(proto, 6 | 17 | 136)) {
        frame
            .get(at..at + 4)
            .into_iter()
            .flatten()
            .copied()
            .for_each(&mut mix);
    }
    h
}

/// The strict-priority band of an Ethernet frame: its DSCP class (the top 3 bits of the IPv4
/// TOS or IPv6 traffic class: CS0 … CS7), at most `bands − 1`; 0 for a frame that is not IP
/// (ARP) or too short to say.
pub fn band_of(frame: &[u8], bands: u8) -> u8 {
    if bands <= 1 {
        return 0;
    }
    let Some((ethertype, ip)) = ether(frame) else {
        return 0;
    };
    let tos = match ethertype {
        0x0800 if frame.len() > ip + 1 && frame[ip] >> 4 == 4 => frame[ip + 1],
        0x86DD if frame.len() > ip + 1 && frame[ip] >> 4 == 6 => {
            (frame[ip] << 4) | (frame[ip + 1] >> 4)
        }
        _ => return 0,
    };
    (tos >> 5).min(bands - 1)
}
