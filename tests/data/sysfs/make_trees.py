#!/usr/bin/env python3
"""Writes the hand-made host trees under tests/data/sysfs/ (everything except procfs/).

Run from anywhere: python3 tests/data/sysfs/make_trees.py. It deletes and rewrites roce-cx6dx/,
ib-hdr/, roce-vendor-ecn/ and rxe-virtio/. The trees follow real sysfs layout: /sys/class/infiniband/<dev> and
/sys/class/net/<if> are relative symlinks into /sys/devices/pci.../<bdf>/..., each RDMA device has a
`device` link to its PCI function, VLAN netdevs live under /sys/devices/virtual/net with lower_/upper_
links. Values are synthetic but shaped like what the kernel prints.
"""
import ipaddress
import os
import shutil

HERE = os.path.dirname(os.path.abspath(__file__))


def put(root, path, text):
    full = os.path.join(root, path.lstrip("/"))
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w") as f:
        f.write(text)


def link(root, path, target):
    full = os.path.join(root, path.lstrip("/"))
    os.makedirs(os.path.dirname(full), exist_ok=True)
    os.symlink(target, full)


def rel(src_dir, dst):
    return os.path.relpath(dst, src_dir)


def gid_text(addr):
    b = ipaddress.IPv6Address(addr).packed
    return ":".join(b[i:i + 2].hex() for i in range(0, 16, 2)) + "\n"


def mapped(v4):
    return "::ffff:" + v4


def pci_function(root, bdf, bridge, numa, device_id):
    d = f"/sys/devices/{bridge}/{bdf}"
    put(root, d + "/numa_node", f"{numa}\n")
    put(root, d + "/vendor", "0x15b3\n")
    put(root, d + "/device", f"{device_id}\n")
    put(root, d + "/current_link_speed", "16.0 GT/s PCIe\n")
    put(root, d + "/current_link_width", "16\n")
    return d


def netdev(root, pci_dir, name, ifindex, mtu, mac, dev_port=0):
    d = pci_dir + "/net/" + name
    put(root, d + "/ifindex", f"{ifindex}\n")
    put(root, d + "/mtu", f"{mtu}\n")
    put(root, d + "/address", mac + "\n")
    put(root, d + "/operstate", "up\n")
    put(root, d + "/dev_port", f"{dev_port}\n")
    link(root, d + "/device", rel(d, pci_dir))
    link(root, "/sys/class/net/" + name, rel("/sys/class/net", d))
    return d


def vlan(root, parent_dir, parent, vid, ifindex, mtu, mac):
    name = f"{parent}.{vid}"
    d = "/sys/devices/virtual/net/" + name
    put(root, d + "/ifindex", f"{ifindex}\n")
    put(root, d + "/mtu", f"{mtu}\n")
    put(root, d + "/address", mac + "\n")
    put(root, d + "/operstate", "up\n")
    link(root, d + "/lower_" + parent, rel(d, parent_dir))
    link(root, parent_dir + "/upper_" + name, rel(parent_dir, d))
    link(root, "/sys/class/net/" + name, rel("/sys/class/net", d))
    return name


def ib_device(root, pci_dir, name, attrs):
    d = pci_dir + "/infiniband/" + name
    for k, v in attrs.items():
        put(root, d + "/" + k, v + "\n")
    link(root, d + "/device", rel(d, pci_dir))
    link(root, "/sys/class/infiniband/" + name, rel("/sys/class/infiniband", d))
    return d


def port(root, dev_dir, num, state, phys, rate, link_layer, gids, counters, hw_counters=None, table_size=16):
    p = f"{dev_dir}/ports/{num}"
    put(root, p + "/state", state + "\n")
    put(root, p + "/phys_state", phys + "\n")
    put(root, p + "/rate", rate + "\n")
    put(root, p + "/link_layer", link_layer + "\n")
    put(root, p + "/lid", "0x0\n" if link_layer == "Ethernet" else "0x1a\n")
    # A real table lists every slot; empty slots read as the zero GID and their attrs fail with EINVAL
    # (here: no attr file).
    for i in range(table_size):
        entry = gids[i] if i < len(gids) else None
        put(root, f"{p}/gids/{i}", gid_text(entry[0] if entry else "::"))
        if entry:
            put(root, f"{p}/gid_attrs/types/{i}", entry[1] + "\n")
            if entry[2]:
                put(root, f"{p}/gid_attrs/ndevs/{i}", entry[2] + "\n")
    for k, v in counters.items():
        put(root, f"{p}/counters/{k}", f"{v}\n")
    if hw_counters is not None:
        for k, v in hw_counters.items():
            put(root, f"{p}/hw_counters/{k}", f"{v}\n")
    return p


PMA = dict(VL15_dropped=0, excessive_buffer_overrun_errors=0, link_downed=0, link_error_recovery=0,
           local_link_integrity_errors=0, port_rcv_constraint_errors=0, port_rcv_errors=0,
           port_rcv_remote_physical_errors=0, port_rcv_switch_relay_errors=0, port_xmit_constraint_errors=0,
           port_xmit_discards=0, port_xmit_wait=0, symbol_error=0, multicast_rcv_packets=0,
           multicast_xmit_packets=0)


def pma(xmit_words, rcv_words, xmit_pkts, rcv_pkts, **extra):
    c = dict(PMA)
    c.update(port_xmit_data=xmit_words, port_rcv_data=rcv_words, port_xmit_packets=xmit_pkts,
             port_rcv_packets=rcv_pkts, unicast_xmit_packets=xmit_pkts, unicast_rcv_packets=rcv_pkts)
    c.update(extra)
    return c


def roce_hw(**over):
    c = dict(duplicate_request=0, implied_nak_seq_err=0, lifespan=10, local_ack_timeout_err=0, out_of_buffer=0,
             out_of_sequence=0, packet_seq_err=0, req_cqe_error=0, req_cqe_flush_error=0,
             rnr_nak_retry_err=0, rx_read_requests=0, rx_write_requests=0, np_cnp_sent=0,
             np_ecn_marked_roce_packets=0, rp_cnp_handled=0, rp_cnp_ignored=0, rx_icrc_encapsulated=0,
             roce_adp_retrans=0, roce_slow_restart=0)
    c.update(over)
    return c


def cx6dx(root):
    bridge = "pci0000:3a/0000:3a:00.0"
    names = ["enp59s0f0np0", "enp59s0f1np1"]
    macs = ["b8:3f:d2:a1:b2:c4", "b8:3f:d2:a1:b2:c5"]
    lls = ["fe80::ba3f:d2ff:fea1:b2c4", "fe80::ba3f:d2ff:fea1:b2c5"]
    for fn in range(2):
        bdf = f"0000:3b:00.{fn}"
        pci = pci_function(root, bdf, bridge, 0, "0x101d")
        nd = netdev(root, pci, names[fn], 4 + fn, 9000, macs[fn])
        dev = ib_device(root, pci, f"mlx5_{fn}", {
            "node_type": "1: CA", "fw_ver": "22.39.1002", "hca_type": "MT4125", "board_id": "MT_0000000359",
            "node_guid": f"b83f:d203:00a1:b2c{4 + fn}", "sys_image_guid": "b83f:d203:00a1:b2c4",
            "node_desc": f"gpu-node-07 mlx5_{fn}"})
        if fn == 0:
            v = vlan(root, nd, names[0], 100, 6, 9000, macs[0])
            gids = [(lls[0], "IB/RoCE v1", names[0]), (lls[0], "RoCE v2", names[0]),
                    (mapped("10.10.1.11"), "IB/RoCE v1", names[0]), (mapped("10.10.1.11"), "RoCE v2", names[0]),
                    ("fd00:10:1::11", "IB/RoCE v1", names[0]), ("fd00:10:1::11", "RoCE v2", names[0]),
                    (lls[0], "IB/RoCE v1", v), (lls[0], "RoCE v2", v),
                    (mapped("192.168.100.11"), "IB/RoCE v1", v), (mapped("192.168.100.11"), "RoCE v2", v),
                    (mapped("10.10.9.11"), "IB/RoCE v1", names[0]), (mapped("10.10.9.11"), "RoCE v2", names[0])]
            hw = roce_hw(np_cnp_sent=120554, np_ecn_marked_roce_packets=120990, rp_cnp_handled=98812,
                         out_of_sequence=3, packet_seq_err=1, local_ack_timeout_err=2)
            counters = pma(3530287420123, 2201188776, 5811720381, 901231177)
        else:
            gids = [(lls[1], "IB/RoCE v1", names[1]), (lls[1], "RoCE v2", names[1]),
                    (mapped("10.10.2.11"), "IB/RoCE v1", names[1]), (mapped("10.10.2.11"), "RoCE v2", names[1])]
            hw = roce_hw()
            counters = pma(0, 0, 0, 0)
        port(root, dev, 1, "4: ACTIVE", "5: LinkUp", "100 Gb/sec (4X EDR)", "Ethernet", gids, counters, hw)
        cc = f"/sys/kernel/debug/mlx5/{bdf}/cc_params"
        defaults = dict(rp_clamp_tgt_rate=0, rp_clamp_tgt_rate_ati=1, rp_time_reset=300, rp_byte_reset=32767,
                        rp_threshold=1, rp_ai_rate=5, rp_max_rate=0, rp_hai_rate=50, rp_min_dec_fac=50,
                        rp_min_rate=1, rp_rate_to_set_on_first_cnp=0, rp_dce_tcp_g=1019, rp_dce_tcp_rtt=1,
                        rp_rate_reduce_monitor_period=4, rp_initial_alpha_value=1023, rp_gd=11,
                        np_min_time_between_cnps=4, np_cnp_dscp=48, np_cnp_prio_mode=1, np_cnp_prio=6,
                        rtt_resp_dscp_valid=0, rtt_resp_dscp=0)
        if fn == 1:
            defaults.update(rp_time_reset=55, rp_ai_rate=40, rp_hai_rate=200, rp_threshold=5)
        for k, val in defaults.items():
            put(root, f"{cc}/{k}", f"{val}\n")


def ib_hdr(root):
    bridge = "pci0000:80/0000:80:01.0"
    for fn, (state, phys, rate) in enumerate([("4: ACTIVE", "5: LinkUp", "200 Gb/sec (4X HDR)"),
                                               ("1: DOWN", "3: Disabled", "10 Gb/sec (4X SDR)")]):
        bdf = f"0000:81:00.{fn}"
        pci = pci_function(root, bdf, bridge, 1, "0x101b")
        netdev(root, pci, f"ibp129s0f{fn}", 3 + fn, 4092, f"00:00:10:29:fe:80:00:00:00:00:00:00:b8:3f:d2:03:00:12:34:5{fn}")
        dev = ib_device(root, pci, f"mlx5_{fn}", {
            "node_type": "1: CA", "fw_ver": "20.38.1002", "hca_type": "MT4123", "board_id": "MT_0000000223",
            "node_guid": f"b83f:d203:0012:345{fn}", "sys_image_guid": "b83f:d203:0012:3450",
            "node_desc": f"hpc-node-12 mlx5_{fn}"})
        gids = [(f"fe80::b83f:d203:12:345{fn}", "IB/RoCE v1", None)]
        port(root, dev, 1, state, phys, rate, "InfiniBand", gids,
             pma(81234567890 if fn == 0 else 0, 71234567890 if fn == 0 else 0, 123456789 if fn == 0 else 0,
                 113456789 if fn == 0 else 0), None, table_size=4)


def vendor_ecn(root):
    bridge = "pci0000:5d/0000:5d:00.0"
    bdf = "0000:5e:00.0"
    pci = pci_function(root, bdf, bridge, 0, "0x1017")
    nd = netdev(root, pci, "eth0", 2, 1500, "0c:42:a1:5e:00:10")
    dev = ib_device(root, pci, "mlx5_0", {
        "node_type": "1: CA", "fw_ver": "16.35.2000", "hca_type": "MT4119", "board_id": "MT_0000000080",
        "node_guid": "0c42:a103:005e:0010", "sys_image_guid": "0c42:a103:005e:0010", "node_desc": "edge-3 mlx5_0"})
    gids = [("fe80::e42:a1ff:fe5e:10", "IB/RoCE v1", "eth0"), ("fe80::e42:a1ff:fe5e:10", "RoCE v2", "eth0"),
            (mapped("172.16.5.3"), "IB/RoCE v1", "eth0"), (mapped("172.16.5.3"), "RoCE v2", "eth0")]
    hw = roce_hw(np_cnp_sent=10, np_ecn_marked_roce_packets=12, rp_cnp_handled=4410, rp_cnp_ignored=5022)
    port(root, dev, 1, "4: ACTIVE", "5: LinkUp", "25 Gb/sec (1X EDR)", "Ethernet", gids,
         pma(123456789012, 23456789012, 456789012, 56789012), hw, table_size=8)
    # The vendor driver's ecn/ tree, byte for byte from procfs/sys/class/net/eth0/ecn.
    shutil.copytree(os.path.join(HERE, "procfs/sys/class/net/eth0/ecn"), os.path.join(root, nd.lstrip("/"), "ecn"))


def rxe_virtio(root):
    """A qemu guest with Soft-RoCE (rdma_rxe) on two virtio NICs, as Debian's 6.1 kernel shows it: the
    rxe devices are virtual (no `device` link, a `parent` file naming the netdev), the netdevs sit on
    virtioN children of their PCI functions, hw_counters has rxe's own names and no counters/ (no PMA)."""
    for i, (bdf, virtio) in enumerate([("0000:00:05.0", "virtio2"), ("0000:00:06.0", "virtio3")]):
        pci = pci_function(root, bdf, "pci0000:00", 0, "0x1000")
        put(root, pci + "/vendor", "0x1af4\n")
        vdir = f"{pci}/{virtio}"
        put(root, vdir + "/features", "0\n")
        nd = f"{vdir}/net/eth{i}"
        put(root, nd + "/ifindex", f"{2 + i}\n")
        put(root, nd + "/mtu", "1500\n")
        put(root, nd + "/address", f"52:54:00:10:0{i}:01\n")
        put(root, nd + "/operstate", "up\n")
        link(root, nd + "/device", rel(nd, vdir))
        link(root, f"/sys/class/net/eth{i}", rel("/sys/class/net", nd))
        dev = f"/sys/devices/virtual/infiniband/rxe{i}"
        for k, v in {"node_type": "1: CA", "fw_ver": "", "node_guid": f"5054:00ff:fe10:0{i}01",
                     "sys_image_guid": f"5054:00ff:fe10:0{i}01", "node_desc": "rxe", "parent": f"eth{i}"}.items():
            put(root, dev + "/" + k, v + "\n")
        link(root, f"/sys/class/infiniband/rxe{i}", rel("/sys/class/infiniband", dev))
        gids = [(f"fe80::5054:ff:fe10:{i}01", "RoCE v2", f"eth{i}"), (mapped(f"10.{i + 1}.0.1"), "RoCE v2", f"eth{i}")]
        hw = dict(ack_deferred=0, completer_retry_err=7, duplicate_request=1, lifespan=10, link_downed=1,
                  out_of_seq_request=2, rcvd_pkts=2862, rcvd_rnr_err=0, rcvd_seq_err=3, rdma_recvs=0,
                  rdma_sends=0, retry_exceeded_err=0, retry_rnr_exceeded_err=0, send_err=0, send_rnr_err=0,
                  sent_pkts=1905)
        port(root, dev, 1, "4: ACTIVE", "5: LinkUp", "2.5 Gb/sec (1X SDR)", "Ethernet", gids, {}, hw, table_size=8)


def main():
    for name, fn in [("roce-cx6dx", cx6dx), ("ib-hdr", ib_hdr), ("roce-vendor-ecn", vendor_ecn),
                     ("rxe-virtio", rxe_virtio)]:
        root = os.path.join(HERE, name)
        shutil.rmtree(root, ignore_errors=True)
        os.makedirs(root)
        fn(root)


if __name__ == "__main__":
    main()
